// PsShard's part in replication (roles/server/replication.h): a primary's
// partitions send their changes to the backups before a worker hears of
// them, and a backup's copies replay them.
#include <fmt/format.h>

#include <algorithm>

#include "roles/server/handoff_codec.h"
#include "roles/server/shard.h"

namespace pstrain {

namespace {

MessageBody AckOr(const Status& st) {
  return st.ok() ? MessageBody(Ack{}) : MessageBody(ErrorReply{st.message()});
}

}  // namespace

ReplicationQueue* PsShard::QueueOf(const Key& key) {
  if (!send_) return nullptr;
  return &queues_[key];
}

int64_t PsShard::SendState(PsPartition& p, ReplicationQueue& queue) {
  const Key key{p.tensor(), p.part()};
  const int64_t seq = queue.Next();
  auto state = std::make_shared<std::vector<uint8_t>>(
      EncodePartitionState(MovedPartition{SnapshotOf(p), p.core().Save()}));
  Payload payload{state->data(), state->size(), state};
  send_(Replicate{key.first, key.second, ReplicaKind::kState, -1, seq, OriginOf(key)},
        std::move(payload),
        [this, key, seq](const Status& st) { run_([=] { OnReplicated(key, seq, st); }); });
  return static_cast<int64_t>(state->size());
}

void PsShard::SendUpdate(PsPartition& p, ReplicationQueue& queue) {
  const Key key{p.tensor(), p.part()};
  const int64_t seq = queue.Next();
  queue.StepSent();
  // Copied: the vector is the push's buffer or the step's sum, both reused.
  auto update = std::make_shared<FloatBuffer>(p.last_update(), p.last_update() + p.size());
  Payload payload{reinterpret_cast<const uint8_t*>(update->data()), update->size() * sizeof(float),
                  update};
  send_(Replicate{key.first, key.second, ReplicaKind::kUpdate, p.core().last_applied_worker(), seq},
        std::move(payload),
        [this, key, seq](const Status& st) { run_([=] { OnReplicated(key, seq, st); }); });
}

bool PsShard::IsResentStep(const PsPartition& p, const PushRequest& request) const {
  if (request.kind == PushKind::kInit) return false;
  const UpdateMode mode = config_->train.mode;
  if (mode == UpdateMode::kSync || mode == UpdateMode::kAverage)
    return request.clock + 1 == p.clock();
  return request.clock < p.core().pushes_of(request.worker);
}

ReplicationQueue::Then PsShard::AckOnceHeld(Reply reply) {
  return [reply = std::move(reply)](const Status& held) { reply(AckOr(held), {}); };
}

void PsShard::AckReplicated(PsPartition& p, ReplicationQueue& queue, int64_t applied_before,
                            Reply reply) {
  auto ack = AckOnceHeld(std::move(reply));
  // Sync: gathered for a step not applied yet; acknowledged with the step.
  if (p.applied() == applied_before) return queue.HoldForStep(std::move(ack));
  SendUpdate(p, queue);
  queue.AfterSent(std::move(ack));
}

void PsShard::OnReplicated(const Key& key, int64_t seq, const Status& status) {
  auto queue = queues_.find(key);
  if (queue == queues_.end()) return;
  if (!status.ok())
    log_->error("'{}' partition {}: change {} did not reach its backups: {}", key.first, key.second,
                seq, status.message());
  queue->second.Acked(seq, status);
  // The pulls the applied updates freed, held until now: in sync and
  // average once the backups hold every update sent (a pull must not see
  // one they may lack); async and ssp pulls see what is there.
  const UpdateMode mode = config_->train.mode;
  const bool exact = mode == UpdateMode::kSync || mode == UpdateMode::kAverage;
  if (exact && !queue->second.caught_up()) return;
  if (auto it = partitions_.find(key); it != partitions_.end()) it->second->core().AnswerReady();
}

void PsShard::TakeReplica(int primary, Replicate change, Buffer payload, Reply reply) {
  run_([this, primary, change = std::move(change), payload = std::move(payload),
        reply = std::move(reply)] { reply(AckOr(HoldReplica(primary, change, payload)), {}); });
}

Status PsShard::HoldReplica(int primary, const Replicate& change, const Buffer& payload) {
  const Key key{change.tensor, change.part};
  const std::string what = fmt::format("change {} of the backup of '{}' partition {}", change.seq,
                                       key.first, key.second);
  if (change.kind == ReplicaKind::kState) {
    auto state = DecodePartitionState(payload.data, payload.size, key.first, key.second,
                                      config_->train.partition_bytes / 4);
    if (!state.ok()) return state.status().WithContext(what);
    auto made = Make(key, std::move(state->partition.values));
    if (!made.ok()) return made.status().WithContext(what);
    PSTRAIN_RETURN_IF_ERROR(RestoreState(**made, state->partition, &state->core).WithContext(what));
    backups_[key] = BackupCopy{primary, change.origin < 0 ? primary : change.origin, change.seq,
                               std::move(*made)};
    return Status::OK();
  }
  auto it = backups_.find(key);
  if (it == backups_.end()) return FailedPrecondition(what + ": " + kNoCopy);
  BackupCopy& copy = it->second;
  if (copy.primary != primary)
    return FailedPrecondition(fmt::format("{}: it came from server {}, the copy from server {}",
                                          what, primary, copy.primary));
  if (change.seq != copy.seq + 1)
    return FailedPrecondition(fmt::format("{}: the copy holds change {}", what, copy.seq));
  PsPartition& p = *copy.partition;
  if (payload.size != p.size() * sizeof(float))
    return InvalidArgument(fmt::format("{}: {} bytes for {} floats", what, payload.size, p.size()));
  PSTRAIN_RETURN_IF_ERROR(
      p.Replay(change.worker, reinterpret_cast<const float*>(payload.data)).WithContext(what));
  copy.seq = change.seq;
  return Status::OK();
}

void PsShard::Digests(std::function<void(std::vector<CopyDigest>)> done) {
  run_([this, done = std::move(done)] {
    std::vector<CopyDigest> out;
    for (auto& [key, p] : partitions_) out.push_back({-1, ReplicaDigest(SnapshotOf(*p))});
    for (auto& [key, copy] : backups_)
      out.push_back({copy.primary, ReplicaDigest(SnapshotOf(*copy.partition))});
    done(std::move(out));
  });
}

void PsShard::ApplyView(int self, ServerView view, std::vector<int> primaries) {
  run_([this, self, view = std::move(view), primaries = std::move(primaries)] {
    auto live = [&view](int r) {
      return std::binary_search(view.live.begin(), view.live.end(), r);
    };
    for (auto it = backups_.begin(); it != backups_.end();) {
      const Key key = it->first;
      const int primary = it->second.primary;
      // Placed on `origin`: the primary's own, or one it took over.
      const int origin = it->second.origin;
      const bool lost = !live(primary);
      if (lost && origin >= 0 && origin < static_cast<int>(view.owners.size()) &&
          view.owners[static_cast<size_t>(origin)] == self && !partitions_.count(key)) {
        // Its core replayed every update the lost primary applied: the
        // workers send what it had not acknowledged again, here, and what
        // they hear back waits for the backups to hold its state.
        PsPartition& promoted = *(partitions_[key] = std::move(it->second.partition));
        if (it->second.origin != self) origins_[key] = it->second.origin;
        it = backups_.erase(it);
        queues_.erase(key);
        if (ReplicationQueue* queue = QueueOf(key)) SendState(promoted, *queue);
        Arrived(key, promoted);
      } else if (lost ||
                 std::find(primaries.begin(), primaries.end(), primary) == primaries.end()) {
        // A lost primary's copy another server took over: its new primary
        // changes it from now on, and sends its state to its own backups;
        // kept here, it would go stale.
        it = backups_.erase(it);
      } else {
        ++it;
      }
    }
  });
}

void PsShard::SendStates(
    std::function<void(const Status&, int64_t partitions, int64_t bytes)> done) {
  run_([this, done = std::move(done)] {
    if (!send_ || partitions_.empty()) return done(Status::OK(), 0, 0);
    // The answers run on this thread, as this does: no lock.
    struct Tally {
      int64_t partitions = 0, bytes = 0, left = 0;
      Status first_error;
    };
    auto tally = std::make_shared<Tally>();
    tally->partitions = tally->left = static_cast<int64_t>(partitions_.size());
    for (auto& [key, p] : partitions_) tally->bytes += SendState(*p, *QueueOf(key));
    for (auto& [key, p] : partitions_)
      QueueOf(key)->AfterSent([done, tally](const Status& st) {
        if (!st.ok() && tally->first_error.ok()) tally->first_error = st;
        if (--tally->left == 0) done(tally->first_error, tally->partitions, tally->bytes);
      });
  });
}

}  // namespace pstrain
