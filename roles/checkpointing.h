// Checkpoints, the workers' side. The chief decides when (train.checkpoint:
// every_steps, and at the end) and makes a set complete:
//   1. At step N every partition and table is at N (sync: the chief has
//      pulled step N's values and pushes nothing until the checkpoint is
//      written), so the chief asks every server to write its shard of N:
//      dense partitions and embedding tables, with optimizer state. Every
//      job with servers does this, whether or not it has dense PS tensors.
//   2. While they write, the chief writes the all-reduced weights (with
//      their optimizer state) and every worker's place (roles/worker_place.h).
//   3. Once all have answered, it writes the MANIFEST of step N: only now is
//      the checkpoint complete (src/common/checkpoint_file.h).
//   4. It prunes old checkpoints, keeping train.checkpoint.keep.
// On resume, servers load their shards of the newest complete checkpoint,
// the chief its all-reduced weights, and every worker its place.
#pragma once

#include <cstdint>

#include "roles/allreduced_weights.h"
#include "roles/worker_job.h"
#include "roles/worker_place.h"
#include "src/common/checkpoint_file.h"

namespace pstrain {

// Whether the chief checkpoints once `steps_done` steps are done.
bool CheckpointDue(const Config& config, int64_t steps_done, bool last_step);

// The chief's part of checkpoint `step` (steps 1 to 4 above). `place`, when
// not null, is the chief's own place at `step` (a job that reads no data,
// such as a test's scripted steps, has none); `allreduced`, when not null,
// the ps: false weights.
Status SaveCheckpoint(WorkerContext& context, int64_t step, const WorkerPlace* place = nullptr,
                      const AllReducedWeights* allreduced = nullptr);

// The checkpoint a job starts from: the newest complete one when
// train.checkpoint.resume is set (and one exists), else step 0 with no
// directory.
// `rolled_back`: the job was paused and resumed (generation > 0): every node
// resumes, whatever train.checkpoint.resume says, or a replacement would
// start from scratch among nodes that did not.
StatusOr<CheckpointRef> ResumeCheckpoint(const Config& config, const Logger& log,
                                         bool rolled_back = false);
// Its step.
StatusOr<int64_t> ResumeStep(const Config& config, const Logger& log);

// Where this worker continues from `resume` (step > 0): its place as saved,
// once checked against `now` (this run's place at that step, from the
// config and the data). A checkpoint that lists no place for this worker
// (written before places were saved) gives `now`, with a warning.
StatusOr<WorkerPlace> ResumePlace(const CheckpointRef& resume, const WorkerPlace& now,
                                  const Logger& log);

}  // namespace pstrain
