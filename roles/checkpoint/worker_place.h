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
//   epoch_start 36          the step that epoch began at (step - position)
//   skip_samples 0          > 0: that many of the epoch's permutation were
//                           trained before the data was re-sharded, and
//                           position counts the batches after them
//                           (EpochPlan); both keys are absent in
//                           checkpoints of older versions
//   make_up 96-128,224-256  only in an epoch that has some: permutation
//                           positions below skip_samples a lost worker
//                           never trained; the epoch's rest is them, then
//                           the positions from skip_samples, and position
//                           counts its batches (src/common/epoch_rest.h)
//   training_forwards 40    the model's only random state (dropout masks)
//   lr_schedule ...         the schedule every optimizer follows ("none ..."
//                           when the lr is constant); where each is on it is
//                           its update count, saved with its state
// Nothing else is needed to continue the data: an epoch's order is a
// function of (seed, epoch), and the prefetcher only reads ahead of the
// position (src/data/batcher.h, src/data/prefetcher.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "roles/checkpoint/step_files.h"
#include "src/common/config/config.h"
#include "src/common/epoch_rest.h"
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
  int64_t epoch_start = 0;             // the step the epoch began at: step - position
  int64_t skip_samples = 0;            // of the epoch's permutation, trained before a re-shard
  std::vector<PositionRange> make_up;  // below skip_samples, trained first
  uint64_t training_forwards = 0;
  // The epoch's positions left when its batch `position` begins.
  EpochRest Rest() const { return EpochRest{make_up, skip_samples}; }
  std::string lr_schedule;
};

// The "place" section's text, and its reading back (`path` names where it
// came from in errors); ReadWorkerPlace is the second on a file.
std::string WorkerPlaceText(const WorkerPlace& place);
StatusOr<WorkerPlace> ParseWorkerPlace(const std::string& text, const std::string& path);
// Writes `place` into `step_dir`; returns the file's name there.
StatusOr<std::string> WriteWorkerPlace(const std::string& step_dir, const WorkerPlace& place);
// Reads and checks one (every key present, epoch and position agreeing with
// step).
StatusOr<WorkerPlace> ReadWorkerPlace(const std::string& path);

// OK when `saved` (read from `path`) was written by a run this one (`now`,
// at the same step) continues; otherwise one line naming the key and both
// values ("...: batch_size is 64 in the checkpoint, 32 in this run"). The
// worker count may differ (the data is then re-sharded, see EpochPlan): so
// may steps_per_epoch and rank, while `samples` (this run's training set,
// split by index; -1 when sharded by file) must still give the saved
// steps_per_epoch with the saved worker count.
Status CheckSameRun(const WorkerPlace& saved, const WorkerPlace& now, const std::string& path,
                    int64_t samples = -1);

// Which epoch each step of a run belongs to. A run from scratch, or resumed
// with the worker count it was checkpointed with, has epochs of
// steps_per_epoch steps, the first entered at its position. A run resumed
// with another worker count W' (the saved place had W) re-shards its data:
//   split by index: the interrupted epoch e goes on with the samples not yet
//     trained, those after permutation position skip = position * W * B
//     (src/data/batcher.h), cut into (N - skip) / (W' * B) global batches;
//     no sample of e is trained twice or skipped (but for the tail that
//     makes no whole global batch, dropped as at every epoch's end);
//   sharded by file: each worker's files change (file % W' == rank), and
//     which of the new shard's samples were trained is unknown, so the rest
//     of an interrupted epoch is skipped: the run begins at epoch e + 1.
// Either way the step counter goes on from the checkpoint's step, and later
// epochs have this run's steps_per_epoch.
struct EpochPlan {
  int64_t start_step = 0;              // the run's first step
  int64_t first_epoch = 0;             // the epoch of start_step
  int64_t first_done = 0;              // its batches (after skip_samples) trained before
  int64_t first_left = 0;              // its steps in this run
  int64_t skip_samples = 0;            // its permutation positions trained before a re-shard
  std::vector<PositionRange> make_up;  // its positions to make up first (EpochRest)
  int64_t steps_per_epoch = 0;         // every later epoch

  int64_t Epoch(int64_t step) const;
  int64_t InEpoch(int64_t step) const;  // 0-based, batches after skip_samples
  // The step at which step's epoch rest began (step - InEpoch): a lost
  // worker's batches from there on can be made up at `step`.
  int64_t RestStart(int64_t step) const { return step - InEpoch(step); }
  int64_t EpochSteps(int64_t epoch) const;   // first_done + first_left for the first
  int64_t TotalSteps(int64_t epochs) const;  // the last step + 1 of `epochs` epochs
  int64_t SkipAt(int64_t step) const { return Epoch(step) == first_epoch ? skip_samples : 0; }
  // The positions left of step's epoch when the epoch's batch 0 of this run begins.
  EpochRest RestAt(int64_t step) const {
    return Epoch(step) == first_epoch ? EpochRest{make_up, skip_samples} : EpochRest{};
  }
};

// The plan of a run starting at `start` (its place, as resumed) with
// `steps_per_epoch` steps per epoch of `now` (this run's place at that step).
// `samples`: the training set's size; `by_file`: the data is sharded by file.
// `steps_for(remaining)`: how many steps an epoch of which that many samples
// are left takes with this run's workers (src/data/batcher.h, StepsFor);
// unset: the whole global batches among them.
EpochPlan PlanEpochs(const WorkerPlace& start, const WorkerPlace& now, int64_t samples,
                     bool by_file,
                     const std::function<int64_t(int64_t remaining)>& steps_for = nullptr);
// `place` (of W workers at step S) with the batches the workers `lost` had
// at steps [from, S) put back to be made up first: a lost worker of an
// async or ssp job pushed nothing of them (roles/scheduler/lost_worker.cc).
// The place returned begins its epoch at S (position 0), its rest
// (make_up, skip_samples) naming every position not trained. Refused when
// a step of them lies in an earlier epoch than S's.
StatusOr<WorkerPlace> WithUntrainedBatches(const WorkerPlace& place, const std::vector<int>& lost,
                                           int64_t from, int64_t samples);
// One line for the log saying how a re-sharded run continues: from a
// checkpoint, or (`live`) from a live change of workers.
std::string DescribeReshard(const WorkerPlace& saved, const WorkerPlace& now, const EpochPlan& plan,
                            bool live = false);

// The lr schedule the optimizers of `params` follow under `config`, as one
// line: "lr 0.05 x0.1 every 2340 updates: conv1.weight,conv1.bias; ...", or
// "none (constant lr) ..." when no optimizer decays its lr.
std::string LrScheduleText(const Config& config, const std::vector<std::string>& params);

}  // namespace pstrain
