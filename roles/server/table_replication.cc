// TableHost's part in replication (roles/server/replication.h): a primary's
// tables send each change to the backups as they make it, and a backup's
// copies make the same changes in the same order
// (roles/server/table_replica_codec.h). Rows are created from their id
// alone (embedding/row_init.h), and admission, eviction and the touch
// order depend only on the changes made, so a copy that makes them holds
// the primary's rows, optimizer slots and counts bit for bit.
#include <fmt/format.h>

#include "roles/server/table_host.h"

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
// out, so that no more than one message of them is made at a time here.
Status TableHost::SendDiskRows(HostedTable& t, int64_t* bytes) {
  const std::string& name = t.table.options().name;
  const auto dim = static_cast<uint32_t>(t.table.options().dim);
  return t.table.ForEachDiskBatch(kRowsPerMessage, [&](const RowBatch& batch) {
    std::vector<MovedRows> rows(1);
    rows[0].table = name;
    rows[0].dim = dim;
    rows[0].slots = static_cast<uint32_t>(batch.floats / dim - 1);
    rows[0].table_updates = t.table.table_updates();
    rows[0].rows = batch;
    auto encoded = std::make_shared<std::string>();
    EncodeMovedRows(rows, encoded.get());
    *bytes += static_cast<int64_t>(encoded->size());
    const int64_t seq = t.queue.Next();
    Payload payload{reinterpret_cast<const uint8_t*>(encoded->data()), encoded->size(), encoded};
    send_(Replicate{name, 0, ReplicaKind::kTableRows, -1, seq, rank_}, std::move(payload),
          WhenHeld(name, seq));
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
  if (t == nullptr || spec == nullptr)
    return InvalidArgument(what + ": the config has no such server-held table");
  if (change.kind == ReplicaKind::kTableState) {
    auto state = DecodeTableState(payload.data, payload.size, change.tensor);
    if (!state.ok()) return state.status().WithContext(what);
    auto rows = CopyFromState(*spec, state->rows);
    if (!rows.ok()) return rows.status().WithContext(what);
    auto fresh = MakeHosted(std::move(rows->first));
    PSTRAIN_RETURN_IF_ERROR(fresh->core.Load(state->core).WithContext(what));
    fresh->copy_seq = change.seq;
    fresh->rows_to_come = rows->second;
    tables_[change.tensor] = std::move(fresh);
    ack(Ack{}, {});
    return Status::OK();
  }
  if (t->copy_seq == 0) return FailedPrecondition(what + ": " + kNoCopy);
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

// A tiered copy is made anew in the store: its table there goes first (and
// comes back empty, not whole, if the state cannot be taken).
StatusOr<std::pair<ServerRows, int64_t>> TableHost::CopyFromState(const ServerTable& spec,
                                                                  const std::string& bytes) {
  const std::string& name = spec.options.name;
  if (store_ && spec.memory_rows > 0) {
    tables_.erase(name);
    PSTRAIN_RETURN_IF_ERROR(store_->DropTable(name));
  }
  int64_t rows_to_come = 0;
  auto rows = ServerRows::ReplicaFrom(spec, store_.get(), bytes, &rows_to_come);
  if (rows.ok()) return std::make_pair(std::move(*rows), rows_to_come);
  if (!Find(name)) {
    auto empty = ServerRows::Create(spec, store_.get());
    if (empty.ok()) tables_[name] = MakeHosted(std::move(*empty));
  }
  return rows.status();
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
    for (auto& [name, t] : tables_) {
      if (t->copy_seq > 0 && t->copy_failed.ok() && t->rows_to_come == 0) continue;
      const std::string why = t->copy_seq == 0 ? "its state had not come"
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
