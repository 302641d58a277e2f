// TrainJob when a worker of a sync elastic job is lost mid-step
// (roles/scheduler/lost_worker.cc): the step it was on finishes without it,
// the next is called off, and the others stop there for the change.
#include <fmt/format.h>

#include <algorithm>

#include "roles/checkpoint/worker_place.h"
#include "roles/worker/checkpointing.h"
#include "roles/worker/train_report.h"
#include "roles/worker/trainer.h"
#include "src/data/batcher.h"

namespace pstrain {

int TrainJob::ChiefRank(WorkerContext& ctx) const {
  const std::vector<int> lost = ctx.cluster->LostWorkers();
  int chief = 0;
  while (std::find(lost.begin(), lost.end(), chief) != lost.end()) ++chief;
  return chief;
}

// The ring broke mid-step: a neighbour is gone. When the scheduler names a
// step to stop at after this one, this step finishes without the ring: the
// all-reduced weights skip its update (no worker's all-reduced gradient of
// it is whole), while the servers apply its gradients without the lost
// worker's. A step at or past the stop is called off (CalledOff).
Status TrainJob::AfterRingLost(WorkerContext& ctx, int64_t step, const Status& ring) {
  if (!config_.train.elastic) return ring;
  const int64_t stop = ctx.cluster->AwaitStopStep();
  const std::vector<int> lost = ctx.cluster->LostWorkers();
  if (stop < 0 || lost.empty() || step >= stop) return ring;
  ctx.log->warn(
      "step {}: the ring lost worker {} ({}); the all-reduced (ps: false) weights skip this "
      "step's update, the servers apply it without the lost worker's gradient",
      step + 1, fmt::join(lost, ", "), ring.message());
  return Status::OK();
}

bool TrainJob::PeriodicCheckpointHolds(WorkerContext& ctx, int64_t step) {
  if (!CheckpointDue(config_, step, false)) return false;
  // The chief lost after it began the checkpoint may not have finished it:
  // the new chief writes it again.
  return ctx.cluster->LostWorkers().empty() || ctx.rank != ChiefRank(ctx) ||
         chief_checkpoint_step_ == step;
}

// No wait: the scheduler tells every worker where it stops before a server
// refuses any step past it (roles/scheduler/lost_worker.cc).
bool TrainJob::CalledOff(WorkerContext& ctx, int64_t step) {
  const int64_t stop = ctx.cluster->StopStep();
  return stop >= 0 && step >= stop && !ctx.cluster->LostWorkers().empty();
}

// The job counts a lost worker's batch of the step finished without it as
// used (its gradient reached the servers it reached); the test hook's
// sample log says so on its behalf.
void TrainJob::LogLostBatches(WorkerContext& ctx, const Dataset& data, const EpochPlan& plan,
                              int64_t step, TrainReport& report) const {
  if (ctx.sample_log.empty() || data.sharded_by_file || ctx.rank != ChiefRank(ctx)) return;
  for (int lost : ctx.cluster->LostWorkers()) {
    Batcher theirs =
        Batcher::ForTraining(&data, config_.train.batch_size, lost, ctx.workers, config_.train.seed,
                             config_.data.shuffle, config_.train.elastic.has_value());
    theirs.RecordSampleIds(true);
    const int epoch = static_cast<int>(plan.Epoch(step));
    theirs.StartEpoch(epoch, plan.InEpoch(step), plan.SkipAt(step));
    Batch batch;
    if (theirs.Next(&batch))
      report.Trained(ctx.cluster->generation(), step + 1, epoch, batch.sample_ids);
  }
}

}  // namespace pstrain
