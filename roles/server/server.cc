#include "roles/server/server.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <thread>
#include <tuple>

#include "comm/transport/completion.h"
#include "roles/node/peers.h"
#include "roles/node/resume.h"
#include "roles/server/reshard.h"
#include "roles/server/table_host.h"
#include "src/common/checkpoint_file.h"
#include "src/common/mutex.h"

namespace pstrain {
namespace {

// Partitions up to this size are updated on the loop thread (Server::loop_shard_).
constexpr int64_t kLoopShardBytes = 16 * 1024;

// Partitions one server routes at most: 4M partitions of 4 MiB is 16 TiB,
// far beyond any one server, while the map stays under a few hundred MiB.
constexpr size_t kMaxRoutes = size_t{1} << 22;

int ShardThreads() {
  unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hw / 2, 1u, 4u));
}

}  // namespace

Server::Server(NodeOptions options, Logger log, Config config)
    : config_(std::move(config)), node_(std::move(options), std::move(log)) {}

// After the join: a node joining an elastic job learns the worker count
// from its topology. Loop thread.
void Server::MakeShards() {
  const int workers = node_.cluster().worker_num();
  for (int i = 0; i < ShardThreads(); ++i)
    shards_.push_back(std::make_unique<PsShard>(&config_, workers, node_.log()));
  EventLoop* loop = &node_.loop();
  loop_shard_ =
      std::make_unique<PsShard>(&config_, workers, node_.log(), [loop](std::function<void()> fn) {
        if (loop->InLoopThread()) {
          fn();
        } else {
          loop->Post(std::move(fn));
        }
      });
  if (!backup_links_) return;
  for (PsShard* shard : AllShards()) shard->ReplicateTo(ToBackups(), rank());
}

// A handle left open is logged by ~Node, whose Stop() gets the same error.
Server::~Server() {
  stopping_ = true;
  node_.loop().Stop().IgnoreError();
}

Status Server::Run() { return node_.Outcome(RunOnce()); }

Status Server::RunOnce() {
  node_.cluster().SetRequestHandler(
      [this](const Connection::Ptr& conn, uint64_t id, const MessageBody& body) {
        if (const auto* lose = std::get_if<LoseWorker>(&body)) {
          OnLoseWorker(conn, id, *lose);
          return true;
        }
        if (const auto* change = std::get_if<ChangeWorkers>(&body)) {
          OnChangeWorkers(conn, id, *change);
          return true;
        }
        if (const auto* view = std::get_if<ServerView>(&body)) {
          OnServerView(conn, id, *view);
          return true;
        }
        return false;
      });
  // Before Start: the scheduler's first view may come as soon as it runs.
  const int replicas = config_.train.replication.replicas;
  if (replicas > 0) {
    backup_links_ = std::make_unique<BackupLinks>(&node_.loop());
    backup_links_->OnClosed(
        [this](int backup, const Status& why) { OnBackupLinkClosed(backup, why); });
    const int servers = node_.options().cluster.server_num;
    view_ = ServerView{0, -1, AllServers(servers), AllServers(servers)};
    MakeFence();
  }
  auto topology = node_.Start(
      [this](const Connection::Ptr& c, Incoming&& in) { OnPeerRequest(c, std::move(in)); },
      [this](const Connection::Ptr& c, const Status&) {
        worker_of_.erase(c.get());
        primary_of_.erase(c.get());
      });
  if (!topology.ok()) return topology.status();
  auto tables = TableHost::Create(config_, node_.cluster().worker_num(), rank(),
                                  node_.cluster().server_num(), node_.log());
  if (!tables.ok()) return tables.status();
  if (auto list = ServerTables(config_); list.ok())
    for (const ServerTable& t : *list) table_names_.push_back(t.options.name);
  PSTRAIN_RETURN_IF_ERROR(node_.loop().Call<Status>(
      [&] {
        MakeShards();
        tables_ = std::move(*tables);
        if (backup_links_) tables_->ReplicateTo(ToBackups());
        // Workers that said Hello meanwhile may send requests now.
        ready_ = true;
        for (const auto& [conn, id] : early_hellos_) conn->Reply(id, Ack{});
        early_hellos_.clear();
        if (early_view_) {
          EarlyView early = std::move(*early_view_);
          early_view_.reset();
          OnServerView(early.conn, early.id, early.view);
        }
        return Status::OK();
      },
      Aborted("the server is stopping")));
  // Restored partitions are in place before any worker can push or pull:
  // workers start only after this barrier, where every node agrees on the
  // step it resumes from.
  if (node_.cluster().joined_live()) {
    // 14. A running elastic job: its partitions are moved here live by the
    // chief (roles/worker/grow.h); there is no checkpoint or barrier to join.
    node_.log()->info(
        "server rank {} joined the running job: its partitions come from the "
        "other servers",
        rank());
  } else {
    // Before any partition is made or restored: each change goes to them.
    PSTRAIN_RETURN_IF_ERROR(ConnectBackups(*topology));
    auto found = ResumeCheckpoint(config_, node_.log(), node_.cluster().generation() > 0);
    if (!found.ok()) return found.status();
    PSTRAIN_RETURN_IF_ERROR(RestoreCheckpoint(*found));
    // The tables' shares, empty or restored, go to the backups ahead of
    // any change a worker's request makes.
    if (backup_links_ && tables_)
      tables_->SendStates([this](const Status& st, int64_t, int64_t) {
        if (!st.ok())
          return node_.log()->error("replication: the tables' states: {}", st.message());
        node_.cluster().ReportReplicasHeld(0);  // until then it cannot be taken over
      });
    PSTRAIN_RETURN_IF_ERROR(
        AgreeOnResume(node_.cluster(), *found, fmt::format("server {}", rank())));
  }
  // Stopped before the tables go (Sample asks them for their rows).
  ServerMetrics metrics(node_.options().cluster.log_dir, rank(), node_.log(),
                        [this] { return Sample(); });
  Status finished = node_.Finish([&] {
    if (replicas > 0) LogReplicas();
  });
  metrics.Stop();
  return finished;
}

ServerSample Server::Sample() {
  ServerSample s;
  s.updates = updates_.load(std::memory_order_relaxed);
  s.bytes_sent = node_.loop().bytes_sent();
  s.bytes_received = node_.loop().bytes_received();
  // The rows this server answers for: its own and those of lost servers it
  // took over (its own alone once the loop has stopped).
  const std::vector<TableHost*> hosts = node_.loop().Call<std::vector<TableHost*>>(
      [this] { return PrimaryTables(); }, {tables_.get()});
  for (TableHost* host : hosts) {
    if (host == nullptr) continue;
    for (const std::string& name : table_names_) {
      auto counters = host->Counters(name);
      if (counters.ok()) s.rows += counters->rows;
    }
  }
  return s;
}

// Looked up without copying the name.
PsShard* Server::RouteOf(const std::string& tensor, uint32_t part) {
  auto by_tensor = routes_.find(tensor);
  if (by_tensor == routes_.end()) return nullptr;
  auto it = by_tensor->second.find(part);
  return it == by_tensor->second.end() ? nullptr : it->second;
}

// A partition's shard is fixed the first time it is named (by its size then),
// so a later request of the wrong size still reaches the partition and is
// refused by it with the reason.
PsShard* Server::ShardFor(const std::string& tensor, uint32_t part, int64_t bytes) {
  if (PsShard* routed = RouteOf(tensor, part)) return routed;      // every push and pull
  if (route_count_ >= kMaxRoutes || !loop_shard_) return nullptr;  // none before the join
  auto by_tensor = routes_.find(tensor);
  if (by_tensor == routes_.end()) by_tensor = routes_.emplace(tensor, RoutesOfTensor()).first;
  size_t h = std::hash<std::string>()(tensor) * 31 + part;
  PsShard* shard = bytes <= kLoopShardBytes ? loop_shard_.get() : shards_[h % shards_.size()].get();
  by_tensor->second.emplace(part, shard);
  ++route_count_;
  return shard;
}

void Server::RefuseNewPartition(const Connection::Ptr& conn, uint64_t id, const std::string& tensor,
                                uint32_t part) {
  conn->Reply(id, ErrorReply{fmt::format("'{}' partition {}: this server already holds {} "
                                         "partitions, the most it takes",
                                         tensor, part, kMaxRoutes)});
}

// Replies are made on shard threads and sent from the loop thread.
PsShard::Reply Server::ReplyTo(const Connection::Ptr& conn, uint64_t request_id) {
  EventLoop* loop = &node_.loop();
  return [loop, conn, request_id](MessageBody body, Payload payload) {
    if (loop->InLoopThread()) return conn->Reply(request_id, std::move(body), std::move(payload));
    loop->Post([conn, request_id, body = std::move(body), payload = std::move(payload)]() mutable {
      conn->Reply(request_id, std::move(body), std::move(payload));
    });
  };
}

void Server::OnPeerRequest(const Connection::Ptr& conn, Incoming&& in) {
  const uint64_t id = in.message.request_id;
  if (auto* hello = std::get_if<Hello>(&in.message.body)) return OnHello(conn, id, *hello);
  if (auto* change = std::get_if<Replicate>(&in.message.body))
    return OnReplicate(conn, id, *change, std::move(in.payload));
  if (std::string why = Refusal(conn, in.message.body); !why.empty()) {
    node_.log()->warn("refused {} from {}: {}", MessageName(in.message.body), conn->peer(), why);
    return conn->Reply(id, ErrorReply{why});
  }
  if (Fenced(conn, in)) return;
  const int64_t largest = config_.train.partition_bytes;  // as the partition map cuts tensors
  if (auto* push = std::get_if<PushRequest>(&in.message.body)) {
    if (static_cast<int64_t>(in.payload.size) > largest)
      return conn->Reply(
          id, ErrorReply{fmt::format("push of {} bytes to '{}' partition {}: "
                                     "partitions hold at most {} bytes "
                                     "(train.partition_bytes)",
                                     in.payload.size, push->tensor, push->part, largest)});
    if (const Moved* moved = moved_.Find(push->tensor, push->part)) return conn->Reply(id, *moved);
    PsShard* shard = ShardFor(push->tensor, push->part, static_cast<int64_t>(in.payload.size));
    if (shard == nullptr) return RefuseNewPartition(conn, id, push->tensor, push->part);
    if (push->kind == PushKind::kGradient || push->kind == PushKind::kDelta)
      updates_.fetch_add(1, std::memory_order_relaxed);
    shard->Push(std::move(*push), std::move(in.payload), ReplyTo(conn, id));
  } else if (auto* pull = std::get_if<PullRequest>(&in.message.body)) {
    if (pull->elements <= 0 || pull->elements > largest / 4)
      return conn->Reply(
          id, ErrorReply{fmt::format("pull of {} floats from '{}' partition {}: "
                                     "expected 1 to {} (train.partition_bytes)",
                                     pull->elements, pull->tensor, pull->part, largest / 4)});
    if (const Moved* moved = moved_.Find(pull->tensor, pull->part)) return conn->Reply(id, *moved);
    PsShard* shard = ShardFor(pull->tensor, pull->part, pull->elements * 4);
    if (shard == nullptr) return RefuseNewPartition(conn, id, pull->tensor, pull->part);
    shard->Pull(std::move(*pull), ReplyTo(conn, id));
  } else if (auto* pull = std::get_if<SparsePullRequest>(&in.message.body)) {
    TableHost* tables = TablesOf(pull->origin);
    if (tables == nullptr) return RefuseTables(conn, id, pull->origin);
    tables->Pull(std::move(*pull), std::move(in.payload), ReplyTo(conn, id));
  } else if (auto* push = std::get_if<SparsePushRequest>(&in.message.body)) {
    TableHost* tables = TablesOf(push->origin);
    if (tables == nullptr) return RefuseTables(conn, id, push->origin);
    updates_.fetch_add(1, std::memory_order_relaxed);
    tables->Push(std::move(*push), std::move(in.payload), ReplyTo(conn, id));
  } else if (auto* save = std::get_if<SaveRequest>(&in.message.body)) {
    OnSave(conn, id, *save);
  } else if (auto* hand_off = std::get_if<HandOffRequest>(&in.message.body)) {
    OnHandOff(conn, id, *hand_off);
  } else if (auto* take_over = std::get_if<TakeOverRequest>(&in.message.body)) {
    OnTakeOver(conn, id, *take_over, in.payload);
  } else if (auto* rows_off = std::get_if<RowsHandOffRequest>(&in.message.body)) {
    OnRowsHandOff(conn, id, *rows_off);
  } else if (auto* rows_over = std::get_if<RowsTakeOverRequest>(&in.message.body)) {
    OnRowsTakeOver(conn, id, *rows_over, std::move(in.payload));
  } else if (std::holds_alternative<RowsDigestRequest>(in.message.body)) {
    OnRowsDigest(conn, id);
  } else {
    conn->Reply(
        id, ErrorReply{fmt::format("a server does not handle {}", MessageName(in.message.body))});
  }
}

// A worker introduces itself before anything else; its rank is then bound to
// the connection, so a peer cannot act for another worker.
void Server::OnHello(const Connection::Ptr& conn, uint64_t id, const Hello& hello) {
  // An elastic job's ranks go up to its bound (UpdateCore refuses a rank
  // that is not a member); its generation (StaleHello) keeps out the rest.
  const ElasticBounds& elastic = node_.options().cluster.elastic;
  const int workers = std::max(node_.cluster().worker_num(), elastic.max_workers);
  const NodeInfo& who = hello.node;
  std::string why;
  if (who.role == Role::kServer) {
    why = ServerHelloRefusal(who);
    if (why.empty()) why = StaleHello(hello, node_.cluster().generation());
    if (!why.empty()) {
      node_.log()->warn("refused Hello from {}: {}", conn->peer(), why);
      return conn->Reply(id, ErrorReply{why});
    }
    primary_of_[conn.get()] = who.rank;
    node_.log()->info("server rank {} connected from {}: this server backs up its partitions",
                      who.rank, conn->peer());
    if (!ready_) {
      early_hellos_.emplace_back(conn, id);
      return;
    }
    return conn->Reply(id, Ack{});
  }
  if (who.role != Role::kWorker) {
    why = fmt::format("only workers connect to a server, not a {}", RoleName(who.role));
  } else if (who.rank < 0 || who.rank >= workers) {
    why = fmt::format("worker rank {} is outside the job's 0..{}", who.rank, workers - 1);
  } else {
    why = StaleHello(hello, node_.cluster().generation());
  }
  if (!why.empty()) {
    node_.log()->warn("refused Hello from {}: {}", conn->peer(), why);
    return conn->Reply(id, ErrorReply{why});
  }
  worker_of_[conn.get()] = who.rank;
  node_.log()->info("worker rank {} connected from {}", who.rank, conn->peer());
  // A server that joined a running job may be reached before it has made
  // its partitions' shards and opened its tables (a store on disk takes a
  // while): the Ack, after which the worker sends requests, waits for them.
  if (!ready_) {
    early_hellos_.emplace_back(conn, id);
    return;
  }
  conn->Reply(id, Ack{});
}

std::string Server::Refusal(const Connection::Ptr& conn, const MessageBody& body) {
  auto it = worker_of_.find(conn.get());
  if (it == worker_of_.end())
    return fmt::format("{} before Hello: a worker introduces itself first", MessageName(body));
  const int rank = it->second;
  int named = rank;
  int64_t reached = -1;  // the step this request shows the job has reached
  // Mode average: clocks count rounds of average_every steps.
  const int64_t steps_per_clock =
      config_.train.mode == UpdateMode::kAverage ? std::max(config_.train.average_every, 1) : 1;
  if (auto* push = std::get_if<PushRequest>(&body)) {
    named = push->worker;
    if (push->kind != PushKind::kInit) reached = (push->clock + 1) * steps_per_clock;
  } else if (auto* pull = std::get_if<PullRequest>(&body)) {
    named = pull->worker;
    reached = pull->min_clock * steps_per_clock;
  } else if (auto* push = std::get_if<SparsePushRequest>(&body)) {
    named = push->worker;
    reached = push->clock + 1;
  } else if (auto* pull = std::get_if<SparsePullRequest>(&body)) {
    named = pull->worker;
    reached = pull->min_clock;
  }
  if (named != rank)
    return fmt::format("the request names worker {}, but this connection is worker {}", named,
                       rank);
  if (reached > reached_step_.load()) reached_step_ = reached;
  if (reached >= 0) heard_steps_ = true;
  return "";
}

// Only the chief asks for checkpoints (roles/worker/checkpointing.h), and only of a
// step the job has reached: a peer must not overwrite a complete checkpoint
// or leave a step directory that nothing would ever prune.
void Server::OnSave(const Connection::Ptr& conn, uint64_t id, const SaveRequest& save) {
  const int rank = worker_of_.at(conn.get());
  std::string why;
  if (rank != ChiefRank()) {
    why = fmt::format("worker {} asked for a checkpoint; only the chief (worker {}) may", rank,
                      ChiefRank());
  } else if (save.step < 0) {
    why = fmt::format("checkpoint of step {}: steps are >= 0", save.step);
  } else if (heard_steps_ && save.step > reached_step_.load()) {
    why = fmt::format("checkpoint of step {}: the job has reached step {}", save.step,
                      reached_step_.load());
  }
  if (!why.empty()) {
    node_.log()->warn("refused SaveRequest from {}: {}", conn->peer(), why);
    return conn->Reply(id, ErrorReply{why});
  }
  Save(save.step, save.servers, save.origin, ReplyTo(conn, id));
}

std::vector<PsShard*> Server::AllShards() {
  std::vector<PsShard*> all{loop_shard_.get()};
  for (auto& s : shards_) all.push_back(s.get());
  return all;
}

ShardMeta Server::Meta() {
  return ShardMeta{node_.cluster().rank(), node_.cluster().server_num(),
                   node_.cluster().worker_num()};
}

// Every shard copies out its partitions; the last one to finish hands the
// lot to the I/O thread, which writes the file and answers.
void Server::Save(int64_t step, int servers, int origin, PsShard::Reply reply) {
  if (!config_.train.checkpoint)
    return reply(ErrorReply{"this server's config has no train.checkpoint.dir"}, {});
  struct Gather {
    Mutex mutex;
    std::vector<PartitionSnapshot> partitions GUARDED_BY(mutex);
    StatusOr<TableHost::Snapshots> tables GUARDED_BY(mutex) = TableHost::Snapshots{};
  };
  std::vector<PsShard*> shards = AllShards();
  auto gather = std::make_shared<Gather>();
  std::string dir = CheckpointStepDir(config_.train.checkpoint->dir, step);
  // A replicated job's heir writes a lost server's file too, as that rank.
  const bool own = origin < 0 || origin == node_.cluster().rank();
  if (!own && !backup_links_)
    return reply(ErrorReply{fmt::format("a checkpoint of server {}'s partitions, asked of server "
                                        "{} of a job without train.replication",
                                        origin, node_.cluster().rank())},
                 {});
  const int rank = own ? node_.cluster().rank() : origin;
  std::string file = ShardFileName(rank);
  ShardMeta meta = Meta();
  meta.server = rank;
  if (servers > 0) meta.servers = servers;  // the chief's placement (live growth)
  // The last part in hands the lot to the I/O thread.
  auto parts = std::make_shared<CountDown>(
      shards.size() + 1,  // and the tables
      [this, gather, dir, file, meta, reply](const Status&) {
        io_thread_.Post([this, gather, dir, file, meta, reply] {
          // Uncontended: every part has reported.
          MutexLock lock(&gather->mutex);
          if (!gather->tables.ok()) return reply(ErrorReply{gather->tables.status().message()}, {});
          // Shards hand in their partitions in any order; sorted, the same
          // state gives the same bytes.
          std::sort(gather->partitions.begin(), gather->partitions.end(),
                    [](const PartitionSnapshot& a, const PartitionSnapshot& b) {
                      return std::tie(a.tensor, a.part) < std::tie(b.tensor, b.part);
                    });
          // The store's checkpoint, listed in the shard file (checked on
          // resume): written after it, the shard file vouches for it.
          std::vector<StoreFile> store_files;
          const std::string& store = gather->tables->store_checkpoint;
          if (!store.empty()) {
            auto listed = store_digests_.List(store);
            if (!listed.ok()) return reply(ErrorReply{listed.status().message()}, {});
            store_files = std::move(*listed);
          }
          Status st =
              WriteShardFile(dir + "/" + file, meta, gather->partitions, gather->tables->tables,
                             store.empty() ? nullptr : &store_files);
          if (!st.ok()) return reply(ErrorReply{st.message()}, {});
          reply(SaveReply{file}, {});
        });
      });
  for (PsShard* shard : shards) {
    shard->Snapshot(
        [gather, parts](std::vector<PartitionSnapshot> part) {
          {
            MutexLock lock(&gather->mutex);
            for (auto& p : part) gather->partitions.push_back(std::move(p));
          }
          parts->Report(Status::OK());
        },
        backup_links_ ? rank : -1);
  }
  TableHost* tables = TablesOf(rank);
  if (tables == nullptr) {  // no tables were replicated: the config has none
    if (!table_names_.empty()) {
      MutexLock lock(&gather->mutex);
      gather->tables = FailedPrecondition(fmt::format("server {} holds no table rows of server {}",
                                                      node_.cluster().rank(), origin));
    }
    return parts->Report(Status::OK());
  }
  tables->Snapshot(step, [gather, parts](StatusOr<TableHost::Snapshots> tables) {
    {
      MutexLock lock(&gather->mutex);
      gather->tables = std::move(tables);
    }
    parts->Report(Status::OK());
  });
}

Status Server::RestoreCheckpoint(const CheckpointRef& checkpoint) {
  if (checkpoint.step == 0) return Status::OK();  // the chief's values come with its Init pushes
  std::string path = checkpoint.step_dir + "/" + ShardFileName(node_.cluster().rank());
  auto written_by = ServersOf(checkpoint);
  if (!written_by.ok()) return written_by.status().WithContext("resume");
  const int servers = node_.cluster().server_num();
  StatusOr<ShardContents> contents = ShardContents{};
  if (*written_by == servers) contents = ReadShardFile(path, Meta());
  // Rows of a checkpoint placed by modulo (an older version) are gathered
  // again too: this version looks for them where jump hash puts them.
  const bool old_placement =
      contents.ok() && contents->rows_by_modulo && !contents->tables.empty() && servers > 1;
  if (*written_by != servers || old_placement) {
    if (old_placement)
      node_.log()->info(
          "the checkpoint of step {} placed table rows by modulo (an older version): gathering "
          "this server's rows from every shard",
          checkpoint.step);
    else
      node_.log()->info(
          "resuming a checkpoint of {} servers with {}: gathering this server's "
          "partitions from every shard of step {}",
          *written_by, servers, checkpoint.step);
    path = checkpoint.step_dir;
    contents = GatherReshardedShard(checkpoint, *written_by, config_, rank(), servers,
                                    node_.cluster().worker_num());
  }
  if (!contents.ok()) return contents.status().WithContext("resume");
  const size_t tables = contents->tables.size();
  const int workers = node_.cluster().worker_num();
  if (contents->workers != workers && config_.train.mode == UpdateMode::kAsync) {
    // An async partition counts pushes (step = pushes / workers): rebased
    // so that the step it stands at is the same with the new worker count.
    for (PartitionSnapshot& p : contents->partitions) {
      p.applied = p.applied / std::max(contents->workers, 1) * workers;
      p.clock = p.applied;
    }
  }
  if (config_.train.mode == UpdateMode::kAsync || config_.train.mode == UpdateMode::kSsp) {
    // Every worker resumes at the checkpoint's step: each one's count of
    // pushes (the ssp clock, a lost worker's last step) starts there, not
    // at the slowest worker's count when the checkpoint was taken.
    for (PartitionSnapshot& p : contents->partitions) p.clock = checkpoint.step;
    for (TableSnapshot& t : contents->tables) t.clock = checkpoint.step;
  }
  if (contents->workers != workers)
    node_.log()->info("resuming a checkpoint of {} workers with {}", contents->workers, workers);
  const std::string store =
      contents->has_store ? checkpoint.step_dir + "/" + StoreCheckpointDirName(rank()) : "";
  PSTRAIN_RETURN_IF_ERROR(
      tables_->Restore(std::move(contents->tables), store, contents->store_files)
          .WithContext(path));
  std::vector<PartitionSnapshot>* partitions = &contents->partitions;
  // Route each partition as a request for it would be routed (on the loop,
  // which owns the routes), then let each shard install its own.
  std::map<PsShard*, std::vector<PartitionSnapshot>> per_shard;
  size_t count = partitions->size();
  Status routed = node_.loop().Call<Status>(
      [&]() -> Status {
        for (PartitionSnapshot& p : *partitions) {
          int64_t bytes = static_cast<int64_t>(p.values.size() * sizeof(float));
          PsShard* shard = ShardFor(p.tensor, p.part, bytes);
          if (shard == nullptr) return InvalidArgument("too many partitions in the checkpoint");
          per_shard[shard].push_back(std::move(p));
        }
        return Status::OK();
      },
      Aborted("the server is stopping"));
  PSTRAIN_RETURN_IF_ERROR(routed);
  for (auto& [shard, list] : per_shard) {
    Completion<Status> done;
    shard->Restore(std::move(list), [done](Status st) { done.Set(st); });
    PSTRAIN_RETURN_IF_ERROR(done.Wait().WithContext(path));
  }
  reached_step_ = checkpoint.step;
  node_.log()->info("resumed {} partitions and {} embedding tables from {} (step {})", count,
                    tables, path, checkpoint.step);
  return Status::OK();
}

}  // namespace pstrain
