// WorkerPlace: where one worker stands at a checkpoint step: its place in
// its data, the state of its random streams, and what the run it belongs to
// looked like, so that a resumed run can check it continues the same run.
//
// It is the file "worker-<rank>.ckpt" of the step (src/common/checkpoint_file.h),
// one text section "place" of "key value" lines:
//   step 40                 steps done
//   rank 1, workers 2       whose place, in a job of how many workers
//   batch_size 32, seed 1, shuffle 1, steps_per_epoch 18
//   epoch 2                 the epoch of the next step (0-based)
//   position 4              batches of that epoch already trained
//   training_forwards 40    the model's only random state (dropout masks)
//   lr_schedule ...         the schedule every optimizer follows ("none ..."
//                           when the lr is constant); where each is on it is
//                           its update count, saved with its state
// Nothing else is needed to continue the data: an epoch's order is a
// function of (seed, epoch), and the prefetcher only reads ahead of the
// position (src/data/batcher.h, src/data/prefetcher.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/config.h"
#include "src/common/status.h"

namespace pstrain {

struct WorkerPlace {
  int64_t step = 0;
  int rank = 0;
  int workers = 1;
  int batch_size = 0;
  uint64_t seed = 0;
  bool shuffle = false;
  int64_t steps_per_epoch = 0;
  int64_t epoch = 0;
  int64_t position = 0;
  uint64_t training_forwards = 0;
  std::string lr_schedule;
};

// "worker-<rank>.ckpt".
std::string WorkerPlaceFileName(int rank);

// Writes `place` into `step_dir`; returns the file's name there.
StatusOr<std::string> WriteWorkerPlace(const std::string& step_dir, const WorkerPlace& place);
// Reads and checks one (every key present, epoch and position agreeing with
// step).
StatusOr<WorkerPlace> ReadWorkerPlace(const std::string& path);

// OK when `saved` (read from `path`) was written by a run this one (`now`,
// at the same step) continues; otherwise one line naming the key and both
// values ("...: batch_size is 64 in the checkpoint, 32 in this run").
Status CheckSameRun(const WorkerPlace& saved, const WorkerPlace& now, const std::string& path);

// The lr schedule the optimizers of `params` follow under `config`, as one
// line: "lr 0.05 x0.1 every 2340 updates: conv1.weight,conv1.bias; ...", or
// "none (constant lr) ..." when no optimizer decays its lr.
std::string LrScheduleText(const Config& config, const std::vector<std::string>& params);

}  // namespace pstrain
