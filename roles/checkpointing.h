// Checkpoints, the workers' side. The chief decides when (train.checkpoint:
// every_steps, and at the end) and makes a set complete:
//   1. At step N every partition is at N (sync: the chief has pulled step
//      N's values and pushes nothing until the checkpoint is written), so
//      the chief asks every server to write its shard of N.
//   2. Once all have answered, it writes the MANIFEST of step N: only now is
//      the checkpoint complete (src/common/checkpoint_file.h).
//   3. It prunes old checkpoints, keeping train.checkpoint.keep.
// On resume, servers load their shards of the newest complete checkpoint and
// every worker starts at its step.
#pragma once

#include <cstdint>

#include "roles/allreduced_weights.h"
#include "roles/worker_job.h"
#include "src/common/checkpoint_file.h"

namespace pstrain {

// Whether the chief checkpoints once `steps_done` steps are done.
bool CheckpointDue(const Config& config, int64_t steps_done, bool last_step);

// The chief's part of checkpoint `step` (steps 1 to 3 above). With
// `allreduced`, the chief also writes the ps: false weights into the step
// (before the MANIFEST, which lists that file too).
Status SaveCheckpoint(WorkerContext& context, int64_t step,
                      const AllReducedWeights* allreduced = nullptr);

// The checkpoint a job starts from: the newest complete one when
// train.checkpoint.resume is set (and one exists), else step 0 with no
// directory.
StatusOr<CheckpointRef> ResumeCheckpoint(const Config& config, const Logger& log);
// Its step.
StatusOr<int64_t> ResumeStep(const Config& config, const Logger& log);

}  // namespace pstrain
