// TableHost's part in replication (roles/server/replication.h): a primary's
// tables send each change to the backups as they make it, and a backup's
// copies make the same changes in the same order
// (roles/server/table_replica_codec.h). Rows are created from their id
// alone (embedding/row_init.h), and admission, eviction and the touch
// order depend only on the changes made, so a copy that makes them holds
// the primary's rows, optimizer slots and counts bit for bit.
#include <fmt/format.h>

#include <chrono>
#include <memory>

#include "roles/server/table_host.h"
#include "src/common/mutex.h"

namespace pstrain {
namespace {

MessageBody AckOr(const Status& st) {
  return st.ok() ? MessageBody(Ack{}) : MessageBody(ErrorReply{st.message()});
}

// Ids one change may carry, as one request (table_host.cc).
constexpr int64_t kMaxIdsPerChange = int64_t{1} << 24;
// Rows on a primary's disk sent in one message after its state: 64 Ki rows
// of a 16-float row with Adam's two slots are 12 MiB.
constexpr size_t kRowsPerMessage = 65536;

// Bytes of rows on disk sent and not yet held by every backup: the table
// thread sends more only below kWindowBytes (the answers, on the loop
// thread, make room), so that a share far larger than memory is not read
// into the link's queue whole. A backup that holds nothing more within
// kWindowPatience (its link closed: the states are sent again then) ends
// the copy.
constexpr int64_t kWindowBytes = int64_t{64} << 20;
constexpr auto kWindowPatience = std::chrono::seconds(60);

class SendWindow {
 public:
  // Whether `bytes` more may go out now (false: none made room in time).
  bool Take(int64_t bytes) {
    MutexLock lock(&mutex_);
    if (!room_.WaitFor(&lock, kWindowPatience,
                       [&] { return out_ == 0 || out_ + bytes <= kWindowBytes; }))
      return false;
    out_ += bytes;
    return true;
  }
  void Give(int64_t bytes) {
    MutexLock lock(&mutex_);
    out_ -= bytes;
    room_.NotifyAll();
  }

 private:
  Mutex mutex_;
  CondVar room_;
  int64_t out_ GUARDED_BY(mutex_) = 0;
};

}  // namespace

ReplicationQueue::Then TableHost::AckOnceHeld(Reply reply) {
  return [reply = std::move(reply)](const Status& held) { reply(AckOr(held), {}); };
}

void TableHost::ReplicateTo(ReplicaSender send) {
  thread_.Post([this, send = std::move(send)]() mutable { send_ = std::move(send); });
}

void TableHost::SendChange(HostedTable& t, TableOp op, int worker, const int64_t* ids, size_t n,
                           const float* grads) {
  if (!send_) return;
  const int64_t seq = t.queue.Next();
  auto bytes = std::make_shared<std::vector<uint8_t>>(
      EncodeTableChange(op, t.core.step(), ids, n, grads, t.table.options().dim));
  Payload payload{bytes->data(), bytes->size(), bytes};
  const std::string& name = t.table.options().name;
  send_(Replicate{name, 0, ReplicaKind::kTableOps, worker, seq, rank_}, std::move(payload),
        WhenHeld(name, seq));
}

std::function<void(const Status&)> TableHost::WhenHeld(const std::string& table, int64_t seq) {
  return [this, table, seq](const Status& st) {
    thread_.Post([this, table, seq, st] { OnReplicated(table, seq, st); });
  };
}

void TableHost::OnReplicated(const std::string& table, int64_t seq, const Status& status) {
  HostedTable* t = Find(table);
  if (t == nullptr) return;
  if (!status.ok())
    log_->error("table '{}': change {} did not reach its backups: {}", table, seq,
                status.message());
  t->queue.Acked(seq, status);
}

bool TableHost::IsResentPush(const HostedTable& t, const SparsePushRequest& request) const {
  if (!send_) return false;
  if (mode_ == UpdateMode::kSync || mode_ == UpdateMode::kAverage)
    return request.clock + 1 == t.core.clock();
  return request.worker >= 0 && request.clock < t.core.pushes_of(request.worker);
}

void TableHost::SendStates(std::function<void(const Status&, int64_t tables, int64_t bytes)> done) {
  thread_.Post([this, done = std::move(done)] {
    if (!send_ || tables_.empty()) return done(Status::OK(), 0, 0);
    // The answers run on this thread, as this does: no lock.
    struct Tally {
      int64_t tables = 0, bytes = 0, left = 0;
      Status first_error;
    };
    auto tally = std::make_shared<Tally>();
    tally->tables = tally->left = static_cast<int64_t>(tables_.size());
    for (auto& [name, t] : tables_) {
      std::string rows;
      t->table.Serialize(&rows);
      auto bytes = std::make_shared<std::vector<uint8_t>>(EncodeTableState(t->core.Save(), rows));
      tally->bytes += static_cast<int64_t>(bytes->size());
      const int64_t seq = t->queue.Next();
      Payload payload{bytes->data(), bytes->size(), bytes};
      send_(Replicate{name, 0, ReplicaKind::kTableState, -1, seq, rank_}, std::move(payload),
            WhenHeld(name, seq));
      Status sent = SendDiskRows(*t, &tally->bytes);
      if (!sent.ok() && tally->first_error.ok()) tally->first_error = sent;
    }
    for (auto& [name, t] : tables_)
      t->queue.AfterSent([done, tally](const Status& st) {
        if (!st.ok() && tally->first_error.ok()) tally->first_error = st;
        if (--tally->left == 0) done(tally->first_error, tally->tables, tally->bytes);
      });
  });
}

// A tiered table's rows on disk alone follow its state, read as they go
// out, at most kWindowBytes of them on their way at a time.
Status TableHost::SendDiskRows(HostedTable& t, int64_t* bytes) {
  const std::string& name = t.table.options().name;
  auto window = std::make_shared<SendWindow>();
  return t.table.ForEachDiskBatch(kRowsPerMessage, [&](RowBatch batch) -> Status {
    std::vector<MovedRows> rows;
    rows.push_back(Moving(name, t.table, std::move(batch)));
    auto encoded = std::make_shared<std::string>();
    EncodeMovedRows(rows, encoded.get());
    const auto size = static_cast<int64_t>(encoded->size());
    if (!window->Take(size))
      return Unavailable(fmt::format(
          "table '{}': the backups held none of its rows on disk sent within {} s", name,
          std::chrono::duration_cast<std::chrono::seconds>(kWindowPatience).count()));
    *bytes += size;
    const int64_t seq = t.queue.Next();
    Payload payload{reinterpret_cast<const uint8_t*>(encoded->data()), encoded->size(), encoded};
    auto held = WhenHeld(name, seq);
    send_(Replicate{name, 0, ReplicaKind::kTableRows, -1, seq, rank_}, std::move(payload),
          [window, size, held](const Status& st) {
            window->Give(size);
            held(st);
          });
    return Status::OK();
  });
}

void TableHost::TakeReplica(Replicate change, Buffer payload, Reply reply) {
  thread_.Post(
      [this, change = std::move(change), payload = std::move(payload), reply = std::move(reply)] {
        Status st = HoldReplica(change, payload, reply);
        if (!st.ok()) reply(AckOr(st), {});
      });
}

Status TableHost::HoldReplica(const Replicate& change, const Buffer& payload, const Reply& ack) {
  const std::string what = fmt::format("change {} of the backup of server {}'s table '{}'",
                                       change.seq, rank_, change.tensor);
  HostedTable* t = Find(change.tensor);
  const ServerTable* spec = nullptr;
  for (const ServerTable& s : specs_)
    if (s.options.name == change.tensor) spec = &s;
  if (spec == nullptr) return InvalidArgument(what + ": the config has no such server-held table");
  if (change.kind == ReplicaKind::kTableState) {
    auto state = DecodeTableState(payload.data, payload.size, change.tensor);
    if (!state.ok()) return state.status().WithContext(what);
    PSTRAIN_RETURN_IF_ERROR(TakeState(*spec, change.seq, *state).WithContext(what));
    ack(Ack{}, {});
    return Status::OK();
  }
  if (t == nullptr || t->copy_seq == 0) return FailedPrecondition(what + ": " + kNoCopy);
  if (!t->copy_failed.ok()) return t->copy_failed;
  if (change.seq != t->copy_seq + 1)
    return FailedPrecondition(fmt::format("{}: the copy holds change {}", what, t->copy_seq));
  if (change.kind == ReplicaKind::kTableRows) return HoldDiskRows(*t, change.seq, payload, ack);
  if (t->rows_to_come > 0)
    return FailedPrecondition(
        fmt::format("{}: {} rows of the state are still to come", what, t->rows_to_come));
  const int dim = t->table.options().dim;
  auto made = DecodeTableChange(payload.data, payload.size, change.tensor, dim, kMaxIdsPerChange);
  if (!made.ok()) return made.status().WithContext(what);
  // Held once it is here, whole and in order: this thread makes it before
  // anything after it, a promotion included. Acknowledged before it is
  // made, so that the primary's push and pull wait for the link, not for
  // this copy's work too.
  t->copy_seq = change.seq;
  ack(Ack{}, {});
  Status made_here = Replay(*t, change.worker, *made);
  if (!made_here.ok()) {
    // Never expected (the change was checked); the copy can no longer be
    // promoted, and every later change is refused with why.
    t->copy_failed = made_here.WithContext(what);
    log_->error("{}", t->copy_failed.message());
  }
  return Status::OK();
}

// A tiered copy is made anew in the store: its table there goes first. A
// copy that cannot be made is left empty and not whole (no state held):
// later changes are refused, and it is never promoted.
Status TableHost::TakeState(const ServerTable& spec, int64_t seq, const TableState& state) {
  const std::string& name = spec.options.name;
  const bool tiered = store_ && spec.memory_rows > 0;
  Status made = [&]() -> Status {
    if (tiered) {
      tables_.erase(name);
      PSTRAIN_RETURN_IF_ERROR(store_->DropTable(name));
    }
    int64_t rows_to_come = 0;
    auto rows = ServerRows::ReplicaFrom(spec, store_.get(), state.rows, &rows_to_come);
    if (!rows.ok()) return rows.status();
    auto fresh = MakeHosted(std::move(*rows));
    PSTRAIN_RETURN_IF_ERROR(fresh->core.Load(state.core));
    fresh->copy_seq = seq;
    fresh->rows_to_come = rows_to_come;
    tables_[name] = std::move(fresh);
    return Status::OK();
  }();
  if (made.ok()) return made;
  tables_.erase(name);
  if (tiered) store_->DropTable(name).IgnoreError();
  auto empty = ServerRows::Create(spec, store_.get());
  if (empty.ok()) tables_[name] = MakeHosted(std::move(*empty));
  return made;
}

// Rows the primary holds on disk: put as they were (values, slots, steps,
// counts), checked before the ack, as the state is.
Status TableHost::HoldDiskRows(HostedTable& t, int64_t seq, const Buffer& payload,
                               const Reply& ack) {
  const std::string what = fmt::format("rows on disk of the backup of server {}'s table '{}'",
                                       rank_, t.table.options().name);
  auto moved = DecodeMovedRows(payload.data, payload.size);
  if (!moved.ok()) return moved.status().WithContext(what);
  if (moved->size() != 1 || (*moved)[0].table != t.table.options().name ||
      static_cast<int>((*moved)[0].dim) != t.table.options().dim)
    return InvalidArgument(what + ": not this table's rows");
  const RowBatch& rows = (*moved)[0].rows;
  if (static_cast<int64_t>(rows.size()) > t.rows_to_come)
    return InvalidArgument(
        fmt::format("{}: {} rows, {} to come", what, rows.size(), t.rows_to_come));
  PSTRAIN_RETURN_IF_ERROR(t.table.PutRows(rows).WithContext(what));
  t.rows_to_come -= static_cast<int64_t>(rows.size());
  t.copy_seq = seq;
  ack(Ack{}, {});
  return Status::OK();
}

Status TableHost::Replay(HostedTable& t, int worker, const TableChange& c) {
  const int dim = t.table.options().dim;
  switch (c.op) {
    case TableOp::kLookup:
      replayed_.resize(c.ids.size() * static_cast<size_t>(dim));
      PSTRAIN_RETURN_IF_ERROR(t.table.Lookup(c.ids.data(), c.ids.size(), replayed_.data(), c.step));
      break;
    case TableOp::kApply:
      for (int64_t id : c.ids) PSTRAIN_RETURN_IF_ERROR(t.table.CheckId(id));
      PSTRAIN_RETURN_IF_ERROR(
          t.table.ApplyGradients(c.ids.data(), c.grads.data(), c.ids.size(), c.step));
      PSTRAIN_RETURN_IF_ERROR(t.core.Replay(worker));
      break;
    case TableOp::kEvict:
      return t.table.EvictUntouched(c.step).status();
  }
  return Status::OK();
}

void TableHost::Promote(ReplicaSender send) {
  thread_.Post([this, send = std::move(send)]() mutable {
    for (const ServerTable& spec : specs_) {
      const std::string& name = spec.options.name;
      const HostedTable* t = Find(name);
      if (t != nullptr && t->copy_seq > 0 && t->copy_failed.ok() && t->rows_to_come == 0) continue;
      const std::string why = t == nullptr || t->copy_seq == 0 ? "its state had not come"
                              : t->rows_to_come > 0
                                  ? fmt::format("{} rows on disk had not come", t->rows_to_come)
                                  : t->copy_failed.message();
      not_whole_ = FailedPrecondition(fmt::format(
          "the rows of server {}'s table '{}' are lost: this server's copy was not whole when "
          "it took them over ({})",
          rank_, name, why));
      log_->error("replication: {}", not_whole_.message());
      return;
    }
    send_ = std::move(send);
  });
}

}  // namespace pstrain
