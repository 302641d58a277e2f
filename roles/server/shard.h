// PsShard: the partitions one server thread owns, and the pulls waiting on
// them. Every method posts to the shard's own thread and returns at once; the
// answer goes to the `Reply` given, from that thread. So the partitions need
// no locks: one thread touches them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/transport/buffer.h"
#include "comm/transport/messages.h"
#include "roles/checkpoint/shard_file.h"
#include "roles/server/handoff_codec.h"
#include "roles/server/partition.h"
#include "roles/server/pull_deltas.h"
#include "roles/server/replication.h"
#include "src/common/config/config.h"
#include "src/common/logging.h"
#include "src/common/work_thread.h"

namespace pstrain {

class PsShard {
 public:
  // Sends a reply; must be callable from any thread.
  using Reply = std::function<void(MessageBody body, Payload payload)>;

  // Runs a closure on the thread that owns the shard's partitions.
  using Executor = std::function<void(std::function<void()>)>;

  // `run` null: the shard gets a thread of its own.
  PsShard(const Config* config, int workers, Logger log, Executor run = nullptr);

  // Init (the chief's first values; later Inits are acknowledged and
  // ignored, so a restored checkpoint wins), a gradient (dense, or a
  // threshold message decoded here: a bad one is an error reply and changes
  // nothing) or, in mode average, a weight delta.
  void Push(PushRequest request, Buffer payload, Reply reply);
  // Answers once the partition exists and its clock reaches min_clock
  // (roles/server/update_core.h).
  void Pull(PullRequest request, Reply reply);
  // Copies out every partition, for a checkpoint.
  // `origin` >= 0 (replicated): only the partitions the partition map
  // places on server `origin` (this server's own, or a lost one's it took
  // over), for that rank's file of the checkpoint.
  void Snapshot(std::function<void(std::vector<PartitionSnapshot>)> done, int origin = -1);
  // Installs partitions read from a checkpoint (before any worker connects).
  void Restore(std::vector<PartitionSnapshot> partitions, std::function<void(Status)> done);

  // Live moves (roles/server/handoff.h). HandOff: the partition's state, and
  // it is gone from here; refused while pulls wait on it (a move happens
  // between a step's pull and the next push). Expect: the pushes of a
  // partition not here yet are held until TakeOver installs it (its pulls
  // wait anyway), at most kMaxHeldPushes. TakeOver: installs a moved
  // partition, then takes what waited for it.
  void HandOff(const std::string& tensor, uint32_t part,
               std::function<void(StatusOr<MovedPartition>)> done);
  void Expect(const std::string& tensor, uint32_t part);
  void TakeOver(MovedPartition state, std::function<void(Status)> done);
  // The move was called off: what was held for it is answered with `why`.
  void CallOff(const std::string& tensor, uint32_t part, const std::string& why);
  static constexpr size_t kMaxHeldPushes = 4096;

  // A lost worker of a sync job (roles/server/update_core.h, Lose and
  // FinishWithout), on every partition. last < 0: its pushes are refused
  // from now on; `done` gets the last step any partition holds or applied
  // a gradient of it for (-1: none). last >= 0: step `last` completes
  // without it and later steps are called off with `why`.
  void LoseWorker(int rank, int64_t last, const std::string& why,
                  std::function<void(StatusOr<int64_t>)> done);
  // A live change of workers at `step` (UpdateCore::Renumber), on every
  // partition; partitions made later count `workers` too.
  void ChangeWorkers(int64_t step, std::vector<int> ranks, int workers,
                     std::function<void(const Status&)> done);

  // Replication (roles/server/replication.h). As a primary: every change of
  // a partition is sent through `send`, and what tells a worker of it waits
  // until the backups hold it. Call before any request.
  // `self`: this server's rank, where its partitions are placed.
  void ReplicateTo(ReplicaSender send, int self) {
    send_ = std::move(send);
    self_ = self;
  }
  // A new view of the servers (roles/server/server_replication.cc) on
  // server `self`: the copies of every server no longer live whose
  // partitions the view gives this one become its own (their state goes to
  // the backups first); the other copies of lost servers, and those of live
  // servers not in `primaries`, are dropped (the new primaries send their
  // state to their backups).
  void ApplyView(int self, ServerView view, std::vector<int> primaries);
  // Sends every partition's state to the backups; `done` once all hold
  // them, with the partitions and bytes sent.
  void SendStates(std::function<void(const Status&, int64_t partitions, int64_t bytes)> done);
  // As a backup: a change of a partition of server `primary`.
  void TakeReplica(int primary, Replicate change, Buffer payload, Reply reply);
  // A fingerprint of each copy here (ReplicaDigest), for a check that the
  // backups agree with their primaries: `primary` -1 for this server's own.
  struct CopyDigest {
    int primary = -1;
    uint64_t digest = 0;
  };
  void Digests(std::function<void(std::vector<CopyDigest>)> done);

 private:
  using Key = std::pair<std::string, uint32_t>;
  StatusOr<std::unique_ptr<PsPartition>> Make(const Key& key, std::vector<float> values);
  Status Create(const Key& key, std::vector<float> values, PsPartition** out);
  // Its values, clocks and optimizer state, copied.
  static PartitionSnapshot SnapshotOf(PsPartition& p);
  // A primary's partition: its changes go to the backups first (null: no
  // replication).
  ReplicationQueue* QueueOf(const Key& key);
  // Sends the partition's whole state (returns its bytes), or its last
  // update, to the backups.
  int64_t SendState(PsPartition& p, ReplicationQueue& queue);
  void SendUpdate(PsPartition& p, ReplicationQueue& queue);
  // Replicated: a push this partition applied already, sent again after
  // its primary was lost (it is acknowledged, not applied twice). Sync and
  // average: a push of the step before the clock (every worker's push of
  // that step was in before it was applied, and none was acknowledged
  // before the backups held it). Async and ssp: a push of a step below the
  // count of that worker's pushes applied (one per step).
  bool IsResentStep(const PsPartition& p, const PushRequest& request) const;
  // A push's acknowledgement, for once the backups hold what it waits for
  // (or the error if they failed it).
  static ReplicationQueue::Then AckOnceHeld(Reply reply);
  // A push taken by a replicated partition: acknowledged once the backups
  // hold its effect. `applied_before`: the updates applied before it.
  void AckReplicated(PsPartition& p, ReplicationQueue& queue, int64_t applied_before, Reply reply);
  // The backups hold change `seq` of `key` (or failed it).
  void OnReplicated(const Key& key, int64_t seq, const Status& status);
  Status HoldReplica(int primary, const Replicate& change, const Buffer& payload);
  // Push, on the shard's thread.
  void Take(PushRequest& request, Buffer& payload, Reply& reply);
  // Answers now, or once the partition's clock reaches the pull's min_clock
  // (and, replicated, once the backups hold every change sent before it).
  void PullFrom(PsPartition& partition, const PullRequest& request, Reply reply);
  void PullNow(PsPartition& partition, const PullRequest& request, Reply reply);
  // The partition's values, dense.
  static void Answer(const PsPartition& partition, const Reply& reply);
  // With accept_delta: the largest changes since the worker's last pull
  // (roles/server/pull_deltas.h).
  void AnswerDelta(PsPartition& partition, const PullRequest& request, const Reply& reply);
  // train.clip_norm: a worker's clip factor for a held step, and a norm
  // pull (roles/server/update_core.h).
  void TakeClip(PsPartition& partition, const PushRequest& request, const Buffer& payload,
                const Reply& reply);
  void PullNorm(PsPartition& partition, const PullRequest& request, Reply reply);
  // Why a push of this kind does not fit the job's mode (empty: it does).
  std::string KindRefusal(const PushRequest& request) const;
  // Installs one partition's saved state (a checkpoint's, or a move's with
  // the state of its update rule).
  Status Install(PartitionSnapshot& s, const UpdateCore::State* core = nullptr);
  // Its optimizer state and clocks, from `s` (and `core`), into `p`.
  static Status RestoreState(PsPartition& p, const PartitionSnapshot& s,
                             const UpdateCore::State* core);
  // A partition came (Init or TakeOver): the pulls and pushes held for it.
  void Arrived(const Key& key, PsPartition& partition);

  const Config* config_;
  int workers_;  // the shard's thread
  Logger log_;
  std::map<Key, std::unique_ptr<PsPartition>> partitions_;
  // Pulls of partitions not initialized yet, until the chief's Init.
  std::map<Key, std::vector<std::pair<PullRequest, Reply>>> before_init_;
  // Pushes of partitions expected from a move, until it comes (Expect).
  struct HeldPush {
    PushRequest request;
    Buffer payload;
    Reply reply;
  };
  std::map<Key, std::vector<HeldPush>> expected_;
  // A threshold-encoded push decoded to dense floats (the shard's thread
  // only; kept to reuse its memory).
  std::vector<float> scratch_;
  // Partitions some worker pulls as deltas (created on the first such pull).
  std::map<Key, std::unique_ptr<PullDeltas>> pull_deltas_;
  ReplicaSender send_;  // null: no replication
  int self_ = -1;
  // The rank the partition map places a partition on, where it is not this
  // server's (one taken over from a lost server).
  std::map<Key, int> origins_;
  int OriginOf(const Key& key) const {
    auto it = origins_.find(key);
    return it == origins_.end() ? self_ : it->second;
  }
  std::map<Key, ReplicationQueue> queues_;
  // The partitions this server backs up, and the change each is at.
  struct BackupCopy {
    int primary = -1;
    int origin = -1;  // the rank the partition map places it on
    int64_t seq = 0;
    std::unique_ptr<PsPartition> partition;
  };
  std::map<Key, BackupCopy> backups_;
  Executor run_;
  std::unique_ptr<WorkThread> thread_;  // last: joined before the state above goes
};

}  // namespace pstrain
