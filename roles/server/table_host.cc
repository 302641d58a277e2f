#include "roles/server/table_host.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "comm/transport/completion.h"
#include "embedding/id_dedup.h"
#include "src/common/checkpoint_file.h"

namespace pstrain {
namespace {

// Ids one request may carry: a batch's unique ids, with room to spare.
constexpr int64_t kMaxIdsPerRequest = int64_t{1} << 24;
constexpr int64_t kLogEverySteps = 1000;

std::vector<int64_t> ReadIds(const uint8_t* data, int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  if (n > 0) std::memcpy(ids.data(), data, static_cast<size_t>(n) * sizeof(int64_t));
  return ids;
}

}  // namespace

StatusOr<std::unique_ptr<TableHost>> TableHost::Create(const Config& config, int workers, int rank,
                                                       int servers, Logger log,
                                                       std::string store_dir) {
  auto tables = ServerTables(config);
  if (!tables.ok()) return tables.status();
  // A held step's acks would wait for backups its factor cannot come
  // before (refused in the config too).
  if (config.train.clip_norm > 0 && config.train.replication.replicas > 0 && !tables->empty())
    return FailedPrecondition("train.clip_norm does not work with train.replication yet");
  std::unique_ptr<TableHost> host(new TableHost(config, workers, rank, servers, std::move(log)));
  host->specs_ = std::move(*tables);
  host->store_dir_ = std::move(store_dir);
  PSTRAIN_RETURN_IF_ERROR(host->OpenStore());
  for (const ServerTable& t : host->specs_) {
    auto table = ServerRows::Create(t, host->store_.get());
    if (!table.ok()) return table.status();
    host->tables_.emplace(t.options.name, host->MakeHosted(std::move(*table)));
  }
  return host;
}

Status TableHost::OpenStore() {
  if (!HasMemoryBudget(specs_)) return Status::OK();
  // The default lives under the working directory and is made on demand; a
  // directory the user named must be there (a typo must not fill another
  // disk).
  const std::string& base = config_.train.store_dir;
  std::error_code ec;
  if (base.empty()) {
    std::filesystem::create_directories("pstrain-store", ec);
    if (ec)
      return FailedPrecondition(fmt::format(
          "cannot create the embedding store directory pstrain-store: {}", ec.message()));
  } else if (!std::filesystem::is_directory(base, ec)) {
    return FailedPrecondition(fmt::format(
        "{}: train.store_dir {} is not a directory (create it, on a local disk with room for the "
        "tables' rows)",
        config_.source, base));
  }
  // A server that took another's rank in a live change keeps the store it
  // opened under its old rank until it restarts; a server joining as that
  // rank on the same disk finds it locked and takes the next name free.
  const std::string first = store_dir_.empty() ? ServerStoreDir(config_, rank_) : store_dir_;
  std::string dir = first;
  auto store = RowStore::Open(dir);
  // RocksDB says "lock" when another store holds the directory.
  for (int n = 2;
       !store.ok() && n <= 8 && store.status().message().find("lock") != std::string::npos; ++n) {
    log_->warn("{}", store.status().message());
    dir = fmt::format("{}.{}", first, n);
    store = RowStore::Open(dir);
  }
  if (!store.ok()) return store.status();
  store_ = std::move(*store);
  if (!store_dir_.empty()) removed_at_end_.dir = dir;
  log_->info("table rows beyond their memory budget go to {}",
             std::filesystem::absolute(dir).string());
  return Status::OK();
}

TableHost::~TableHost() = default;

TableHost::RemovedAtEnd::~RemovedAtEnd() {
  std::error_code ec;
  if (!dir.empty()) std::filesystem::remove_all(dir, ec);
}

std::unique_ptr<TableHost::HostedTable> TableHost::MakeHosted(ServerRows table) const {
  auto hosted = std::make_unique<HostedTable>(std::move(table), workers_, mode_);
  if (config_.train.clip_norm > 0) hosted->core.HoldSteps();
  return hosted;
}

TableHost::HostedTable* TableHost::Find(const std::string& name) {
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second.get();
}

std::string TableHost::PlacementRefusal(const std::string& table, int servers) const {
  if (servers == servers_) return "";
  return fmt::format(
      "of table '{}' rows placed over {} servers refused: this server holds the rows of a "
      "placement over {} (the request crossed a change of the job's servers)",
      table, servers, servers_);
}

void TableHost::Pull(SparsePullRequest request, Buffer ids, Reply reply) {
  thread_.Post([this, request = std::move(request), ids = std::move(ids), reply]() {
    HostedTable* t = Find(request.table);
    if (t == nullptr)
      return reply(ErrorReply{fmt::format("pull from unknown table '{}'", request.table)}, {});
    if (ids.size % sizeof(int64_t) != 0 ||
        static_cast<int64_t>(ids.size / sizeof(int64_t)) > kMaxIdsPerRequest)
      return reply(
          ErrorReply{fmt::format("pull from table '{}': {} bytes of ids", request.table, ids.size)},
          {});
    if (request.worker < 0 || request.worker >= workers_)
      return reply(ErrorReply{fmt::format("pull from table '{}' by worker {} of {}", request.table,
                                          request.worker, workers_)},
                   {});
    if (std::string why = PlacementRefusal(request.table, request.servers); !why.empty())
      return reply(ErrorReply{"pull " + why}, {});
    if (!not_whole_.ok()) return reply(ErrorReply{not_whole_.message()}, {});
    if (request.norm) {
      if (ids.size != 0)
        return reply(ErrorReply{fmt::format("norm pull of table '{}' with ids", request.table)},
                     {});
      return PullNorm(*t, request, reply);
    }
    t->core.AnswerAt(request.min_clock, [this, t, ids, reply](const std::string* refused) {
      if (refused != nullptr) return reply(ErrorReply{*refused}, {});
      DoPull(*t, ids, reply);
    });
  });
}

void TableHost::LoseWorker(int rank, int64_t last, const std::string& why,
                           std::function<void(StatusOr<int64_t>)> done) {
  thread_.Post([this, rank, last, why, done = std::move(done)] {
    int64_t held = -1;
    for (auto& named : tables_) {
      HostedTable* t = named.second.get();  // a lambda below takes it: no structured binding
      if (last < 0) {
        StatusOr<int64_t> step = t->core.Lose(rank);
        if (!step.ok()) return done(step.status());
        t->core.AnswerReady();  // ssp: the pulls it held back
        held = std::max(held, *step);
        continue;
      }
      Status st = t->core.FinishWithout(rank, last, why,
                                        [&](float scale) { return ApplyGathered(*t, scale); });
      if (!t->core.mid_step()) {  // what was gathered for a called-off step
        for (auto& ids : t->pending_ids) ids.clear();
        for (auto& grads : t->pending_grads) grads.clear();
      }
      t->core.AnswerReady();
      if (!st.ok()) return done(st);
    }
    done(last < 0 ? held : last);
  });
}

void TableHost::ChangeWorkers(int64_t step, std::vector<int> ranks, int workers,
                              std::function<void(const Status&)> done) {
  thread_.Post([this, step, ranks = std::move(ranks), workers, done = std::move(done)] {
    workers_ = workers;
    for (auto& named : tables_) {
      HostedTable& t = *named.second;
      Status st = t.core.Renumber(step, ranks, workers);
      if (!st.ok()) return done(st.WithContext(t.name));
      t.pending_ids.assign(static_cast<size_t>(workers), {});
      t.pending_grads.assign(static_cast<size_t>(workers), {});
    }
    done(Status::OK());
  });
}

void TableHost::DoPull(HostedTable& t, const Buffer& ids, const Reply& reply) {
  const int64_t n = static_cast<int64_t>(ids.size / sizeof(int64_t));
  const std::vector<int64_t> id_list = ReadIds(ids.data, n);
  const size_t floats = static_cast<size_t>(n) * t.table.options().dim;
  std::shared_ptr<FloatBuffer> rows = GetRows(row_buffers_, floats);
  Touched(t, id_list.data(), id_list.size());
  Status st = t.table.Lookup(id_list.data(), id_list.size(), rows->data(), t.core.step());
  if (!st.ok()) return reply(ErrorReply{st.message()}, {});
  Payload payload{reinterpret_cast<const uint8_t*>(rows->data()), floats * sizeof(float), rows};
  if (!send_) return reply(SparsePullReply{t.core.clock()}, std::move(payload));
  // Rows a backup may lack are not shown: the lookup (which may have
  // created rows) and every update before it are held there first.
  if (!id_list.empty())
    SendChange(t, TableOp::kLookup, -1, id_list.data(), id_list.size(), nullptr);
  t.queue.AfterSent([reply, clock = t.core.clock(), payload](const Status& held) {
    if (!held.ok()) return reply(ErrorReply{held.message()}, {});
    reply(SparsePullReply{clock}, payload);
  });
}

std::shared_ptr<FloatBuffer> TableHost::GetRows(const std::shared_ptr<RowBuffers>& pool,
                                                size_t floats) {
  constexpr size_t kMaxFree = 8;
  std::unique_ptr<FloatBuffer> rows;
  {
    MutexLock lock(&pool->mutex);
    for (auto& buffer : pool->free) {
      if (buffer->capacity() < floats) continue;
      rows = std::move(buffer);
      std::swap(buffer, pool->free.back());
      pool->free.pop_back();
      break;
    }
  }
  if (!rows) rows = std::make_unique<FloatBuffer>();
  rows->resize(floats);
  return std::shared_ptr<FloatBuffer>(rows.release(), [pool](FloatBuffer* p) {
    std::unique_ptr<FloatBuffer> owned(p);
    MutexLock lock(&pool->mutex);
    if (pool->free.size() < kMaxFree) pool->free.push_back(std::move(owned));
  });
}

void TableHost::Push(SparsePushRequest request, Buffer payload, Reply reply) {
  thread_.Post([this, request = std::move(request), payload = std::move(payload), reply]() {
    HostedTable* t = Find(request.table);
    if (t == nullptr)
      return reply(ErrorReply{fmt::format("push to unknown table '{}'", request.table)}, {});
    if (std::string why = PlacementRefusal(request.table, request.servers); !why.empty())
      return reply(ErrorReply{"push " + why}, {});
    if (!not_whole_.ok()) return reply(ErrorReply{not_whole_.message()}, {});
    if (request.clip > 0) {
      if (payload.size != 0)
        return reply(ErrorReply{fmt::format("clip factor for table '{}' with {} bytes of rows",
                                            request.table, payload.size)},
                     {});
      return TakeClip(*t, request, reply);
    }
    // A push sent again after its update was applied is acknowledged once
    // held, not applied twice; checked whole first, as any push.
    if (IsResentPush(*t, request)) {
      auto whole = CheckPush(*t, request, payload);
      if (!whole.ok()) return reply(ErrorReply{whole.status().message()}, {});
      return t->queue.AfterSent(AckOnceHeld(reply));
    }
    const int64_t sent_before = t->queue.sent();
    Status st = DoPush(*t, request, payload);
    if (st.ok()) NoteHeld(*t);
    if (!st.ok()) {
      reply(ErrorReply{st.message()}, {});
    } else if (!send_) {
      reply(Ack{}, {});  // first, as a dense partition does (roles/server/shard.cc)
    } else {
      // Once the backups hold the update: this push's (async, ssp), or in
      // sync the step's, when the last worker's push of it comes.
      if (t->queue.sent() == sent_before) {
        t->queue.HoldForStep(AckOnceHeld(reply));
      } else {
        t->queue.AfterSent(AckOnceHeld(reply));
      }
    }
    t->core.AnswerReady();
    AfterPush(*t);
  });
}

StatusOr<std::vector<int64_t>> TableHost::CheckPush(HostedTable& t,
                                                    const SparsePushRequest& request,
                                                    const Buffer& payload) {
  const int dim = t.table.options().dim;
  if (request.rows > kMaxIdsPerRequest ||
      payload.size != static_cast<uint64_t>(request.rows) * (sizeof(int64_t) + dim * sizeof(float)))
    return InvalidArgument(fmt::format(
        "push to table '{}' of {} rows in {} bytes: expected {} bytes per row (id and {} floats)",
        request.table, request.rows, payload.size, sizeof(int64_t) + dim * sizeof(float), dim));
  std::vector<int64_t> ids = ReadIds(payload.data, request.rows);
  for (int64_t id : ids) PSTRAIN_RETURN_IF_ERROR(t.table.CheckId(id));
  return ids;
}

Status TableHost::DoPush(HostedTable& t, const SparsePushRequest& request, const Buffer& payload) {
  auto checked = CheckPush(t, request, payload);
  if (!checked.ok()) return checked.status();
  std::vector<int64_t> ids = std::move(*checked);
  const int dim = t.table.options().dim;
  const float* grads =
      reinterpret_cast<const float*>(payload.data + request.rows * sizeof(int64_t));
  return t.core.Push(
      request.worker, request.clock, t.name,
      [&] {
        Touched(t, ids.data(), ids.size());
        PSTRAIN_RETURN_IF_ERROR(
            t.table.ApplyGradients(ids.data(), grads, ids.size(), t.core.step()));
        SendChange(t, TableOp::kApply, request.worker, ids.data(), ids.size(), grads);
        return Status::OK();
      },
      [&](int worker, bool) {
        t.pending_ids[worker] = std::move(ids);
        t.pending_grads[worker].assign(grads, grads + request.rows * dim);
      },
      [&](float scale) { return ApplyGathered(t, scale); });
}

// Every worker's push of this step is in: one update with the average.
Status TableHost::ApplyGathered(HostedTable& t, float scale) {
  SumGathered(t, scale);
  return ApplySummed(t, 1.0f);
}

void TableHost::SumGathered(HostedTable& t, float scale) {
  const int dim = t.table.options().dim;
  std::vector<int64_t> all_ids;
  std::vector<float> all_grads;
  for (int w = 0; w < workers_; ++w) {  // in worker order: the same sums every run
    all_ids.insert(all_ids.end(), t.pending_ids[w].begin(), t.pending_ids[w].end());
    all_grads.insert(all_grads.end(), t.pending_grads[w].begin(), t.pending_grads[w].end());
    t.pending_ids[w].clear();
    t.pending_grads[w].clear();
  }
  IdDedup dedup;
  dedup.Reset(all_ids.data(), all_ids.size());
  SumGradients(dedup.inverse(), dedup.unique().size(), all_grads.data(), dim, &t.step_grads);
  for (float& g : t.step_grads) g *= scale;
  t.step_ids.assign(dedup.unique().begin(), dedup.unique().end());
}

Status TableHost::ApplySummed(HostedTable& t, float clip) {
  const std::vector<int64_t>& ids = t.step_ids;
  if (clip != 1.0f)
    for (float& g : t.step_grads) g *= clip;
  // A row changes when the step is applied, not when a push of it comes.
  Touched(t, ids.data(), ids.size());
  if (Status applied =
          t.table.ApplyGradients(ids.data(), t.step_grads.data(), ids.size(), t.core.step());
      !applied.ok()) {
    // The other workers' pushes of the step, held for it, fail as this one.
    t.queue.FailStep(applied);
    return applied;
  }
  SendChange(t, TableOp::kApply, -1, ids.data(), ids.size(), t.step_grads.data());
  if (send_) t.queue.StepSent();
  // Freed, as the step's rows always were: a large batch's would otherwise
  // stay beside the table's memory budget.
  std::vector<int64_t>().swap(t.step_ids);
  std::vector<float>().swap(t.step_grads);
  return Status::OK();
}

// After a push: now and then drop idle rows and log the table's counts; then
// checkpoints that waited for the step. In that order: a table restored from
// step N must not miss the eviction the saved one made at N.
void TableHost::AfterPush(HostedTable& t) {
  const int64_t step = t.core.step();
  if (step % kLogEverySteps == 0 && step != t.logged_step) {
    t.logged_step = step;
    // A failed eviction (the disk) leaves every row where it was: the next
    // round tries again.
    auto evicted = t.table.EvictUntouched(step);
    if (evicted.ok()) SendChange(t, TableOp::kEvict, -1, nullptr, 0, nullptr);
    if (!evicted.ok())
      log_->warn("table '{}' at step {}: idle rows not dropped: {}", t.table.options().name, step,
                 evicted.status().message());
    const EmbeddingTableCounters c = t.table.counters();
    log_->info(
        "table '{}' at step {}: {} rows{}, {} admitted, {} evicted ({} for room), {} dropped "
        "gradients, {} ids waiting for admission",
        t.table.options().name, step, c.rows, t.table.DescribeTiers(), c.admissions, c.evictions,
        c.capacity_evictions, c.dropped_gradients, c.pending_ids);
  }
  for (auto it = waiting_snapshots_.begin(); it != waiting_snapshots_.end();) {
    if (!ReadyFor(it->first)) {
      ++it;
      continue;
    }
    TakeSnapshot(it->first, it->second);
    it = waiting_snapshots_.erase(it);
  }
}

bool TableHost::ReadyFor(int64_t step) const {
  if (mode_ != UpdateMode::kSync) return true;
  for (const auto& [name, t] : tables_)
    if (t->core.clock() < step) return false;
  return true;
}

void TableHost::TakeSnapshot(int64_t step, const SnapshotDone& done) {
  Snapshots out;
  if (store_) {
    // At the same moment as the tables' bytes: no batch runs in between.
    out.store_checkpoint = CheckpointStepDir(config_.train.checkpoint->dir, step) + "/" +
                           StoreCheckpointDirName(rank_);
    std::error_code ec;
    std::filesystem::remove_all(out.store_checkpoint, ec);  // a try at this step that failed
    std::filesystem::create_directories(std::filesystem::path(out.store_checkpoint).parent_path(),
                                        ec);
    Status st = store_->Checkpoint(out.store_checkpoint);
    if (!st.ok()) return done(st.WithContext(fmt::format("checkpoint of step {}", step)));
  }
  for (auto& [name, t] : tables_) {
    TableSnapshot& s = out.tables.emplace_back();
    s.name = name;
    s.clock = t->core.step();
    s.tiered = t->table.tiered();
    t->table.Serialize(&s.bytes);
  }
  done(std::move(out));
}

void TableHost::Snapshot(int64_t step, SnapshotDone done) {
  thread_.Post([this, step, done] {
    if (ReadyFor(step)) return TakeSnapshot(step, done);
    waiting_snapshots_.emplace_back(step, done);
  });
}

namespace {

const ServerTable* FindSpec(const std::vector<ServerTable>& specs, const std::string& name) {
  for (const ServerTable& t : specs)
    if (t.options.name == name) return &t;
  return nullptr;
}

}  // namespace

void TableHost::CloseStore() {
  // Every table over the store goes before the store does.
  for (auto& [name, t] : tables_)
    if (t && t->table.tiered()) t.reset();
  store_.reset();
}

Status TableHost::RestoreStore(const std::string& checkpoint, const std::vector<StoreFile>& files) {
  if (!store_)
    return FailedPrecondition(fmt::format(
        "the checkpoint keeps table rows on disk ({}), and this config sets no memory budget "
        "(server_cache_rows or server_cache_bytes) for any table; to resume with every row in "
        "memory, set server_cache_rows to at least the table's rows on a server",
        checkpoint));
  PSTRAIN_RETURN_IF_ERROR(CheckStoreFiles(checkpoint, files));
  const std::string dir = store_->dir();  // the one this server opened
  CloseStore();
  auto store = RowStore::Restore(checkpoint, dir);
  if (!store.ok()) return store.status();
  store_ = std::move(*store);
  return Status::OK();
}

Status TableHost::Restore(std::vector<TableSnapshot> tables, const std::string& store_checkpoint,
                          const std::vector<StoreFile>& store_files) {
  Completion<Status> done;
  thread_.Post([this, &tables, &store_checkpoint, &store_files, done] {
    DropCopies();  // a change under way is called off with the rollback
    for (TableSnapshot& s : tables) {
      if (FindSpec(specs_, s.name) == nullptr)
        return done.Set(InvalidArgument(
            fmt::format("the checkpoint has table '{}', which the config does not", s.name)));
    }
    if (!store_checkpoint.empty()) {
      Status st = RestoreStore(store_checkpoint, store_files);
      if (!st.ok()) return done.Set(st);
    } else if (store_) {
      // The checkpoint kept every row in memory; this config sets a budget:
      // an empty store again, with no table open, for the rows past it.
      const std::string dir = store_->dir();
      CloseStore();
      auto store = RowStore::Open(dir);
      if (!store.ok()) return done.Set(store.status());
      store_ = std::move(*store);
    }
    for (TableSnapshot& s : tables) {
      auto restored =
          ServerRows::Deserialize(*FindSpec(specs_, s.name), store_.get(), s.tiered, s.bytes);
      if (!restored.ok()) return done.Set(restored.status().WithContext("table " + s.name));
      auto fresh = MakeHosted(std::move(*restored));
      fresh->core.RestoreStep(s.clock);
      tables_[s.name] = std::move(fresh);
    }
    // A table over the new store that the checkpoint did not hold starts
    // empty there.
    for (const ServerTable& spec : specs_) {
      if (tables_[spec.options.name]) continue;
      auto table = ServerRows::Create(spec, store_.get());
      if (!table.ok()) return done.Set(table.status());
      tables_[spec.options.name] = MakeHosted(std::move(*table));
    }
    done.Set(Status::OK());
  });
  return done.Wait();
}

StatusOr<EmbeddingTableCounters> TableHost::Counters(const std::string& table) {
  Completion<StatusOr<EmbeddingTableCounters>> done;
  thread_.Post([this, table, done] {
    HostedTable* t = Find(table);
    if (t == nullptr) return done.Set(NotFound("no table " + table));
    done.Set(t->table.counters());
  });
  return done.Wait();
}

}  // namespace pstrain
