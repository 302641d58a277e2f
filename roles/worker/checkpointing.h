// Checkpoints, the workers' side. The chief decides when (train.checkpoint:
// every_steps, and at the end) and makes a set complete:
//   1. At step N every partition and table is at N, so the chief asks every
//      server to write its shard of N: dense partitions and embedding
//      tables, with optimizer state. Every job with servers does this,
//      whether or not it has dense PS tensors. Training goes on while they
//      write: a server takes the snapshot when it reads the request, before
//      anything the chief sends after it on the same connection, and in
//      sync mode no partition or table applies step N+1 without the
//      chief's push of it.
//   2. The chief writes the all-reduced weights (with their optimizer state)
//      and every worker's place (roles/checkpoint/worker_place.h).
//   3. Once every server has answered, it writes the MANIFEST of step N:
//      only now is the checkpoint complete (src/common/checkpoint_file.h).
//      The chief looks after each step, and waits before the next
//      checkpoint and at the end.
//   4. It prunes old checkpoints, keeping train.checkpoint.keep.
// On resume, servers load their shards of the newest complete checkpoint,
// the chief its all-reduced weights, and every worker its place.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "roles/checkpoint/worker_place.h"
#include "roles/node/resume.h"
#include "roles/worker/allreduced_weights.h"
#include "roles/worker/job.h"
#include "src/common/checkpoint_file.h"

namespace pstrain {

// Whether the chief checkpoints once `steps_done` steps are done.
bool CheckpointDue(const Config& config, int64_t steps_done, bool last_step);

// A checkpoint whose servers may still be writing (steps 3 and 4 to come).
// Destroy it only once done, or after the node's loop stopped.
class CheckpointInFlight {
 public:
  // Whether every server has answered (Finish will not wait).
  bool ServersDone() const { return !servers_ || servers_->IsDone(); }
  // Files other workers wrote into the step directory, already in place
  // (roles/worker/ps_state.h), for the MANIFEST to list.
  void AddWorkerFiles(const std::vector<std::string>& files) {
    local_files_.insert(local_files_.end(), files.begin(), files.end());
  }
  // Steps 3 and 4: waits for the servers, writes the MANIFEST, prunes.
  // `keep_also`: steps whose checkpoints pruning keeps past `keep` (the
  // best, checkpoint.keep_best).
  Status Finish(const std::vector<int64_t>& keep_also = {});
  int64_t step() const { return step_; }

 private:
  friend StatusOr<std::unique_ptr<CheckpointInFlight>> BeginCheckpoint(WorkerContext&, int64_t,
                                                                       const WorkerPlace*,
                                                                       const AllReducedWeights*);
  WorkerContext* ctx_ = nullptr;
  int64_t step_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::optional<KvHandle> servers_;
  std::vector<std::string> files_;  // the servers' (written by the KV client), then ours
  std::vector<std::string> local_files_;
};

// Steps 1 and 2 of checkpoint `step`. `place`, when not null, is the chief's
// own place at `step` (a job that reads no data, such as a test's scripted
// steps, has none); `allreduced`, when not null, the ps: false weights.
StatusOr<std::unique_ptr<CheckpointInFlight>> BeginCheckpoint(
    WorkerContext& context, int64_t step, const WorkerPlace* place = nullptr,
    const AllReducedWeights* allreduced = nullptr);
// All four steps, waiting for the servers.
Status SaveCheckpoint(WorkerContext& context, int64_t step, const WorkerPlace* place = nullptr,
                      const AllReducedWeights* allreduced = nullptr);

// Where this worker continues from `resume` (step > 0): its place as saved,
// once checked against `now` (this run's place at that step, from the
// config and the data). A worker the checkpoint had not (a run resumed with
// more workers) takes the chief's place: every worker's is the same but for
// the rank. A checkpoint that lists no place at all (written before places
// were saved) gives `now`, with a warning. `samples`: see CheckSameRun.
StatusOr<WorkerPlace> ResumePlace(const CheckpointRef& resume, const WorkerPlace& now,
                                  const Logger& log, int64_t samples = -1);

}  // namespace pstrain
