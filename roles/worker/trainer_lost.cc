// TrainJob when a worker of a sync elastic job is lost mid-step
// (roles/scheduler/lost_worker.cc): the step it was on finishes without it,
// the next is called off, and the others go on without it from there, live
// (roles/worker/trainer_workers.cc), training the called-off step again.
#include <fmt/format.h>

#include <algorithm>

#include "roles/checkpoint/worker_place.h"
#include "roles/worker/checkpointing.h"
#include "roles/worker/data_run.h"
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
// step after this one where the job goes on without it, this step finishes
// without the ring: the all-reduced weights skip its update (no worker's
// all-reduced gradient of it is whole), while the servers apply its
// gradients without the lost worker's. A step at or past that one is
// called off (CalledOff).
Status TrainJob::AfterRingLost(WorkerContext& ctx, int64_t step, const Status& ring) {
  if (!config_.train.elastic) return ring;
  const int64_t stop = ctx.cluster->AwaitLostStep();
  const std::vector<int> lost = ctx.cluster->LostWorkers();
  if (stop < 0 || lost.empty() || step >= stop) return ring;
  ctx.log->warn(
      "step {}: the ring lost worker {} ({}); the all-reduced (ps: false) weights skip this "
      "step's update, the servers apply it without the lost worker's gradient",
      step + 1, fmt::join(lost, ", "), ring.message());
  return Status::OK();
}

// No wait: the scheduler tells every worker where the job goes on without
// the lost worker before a server refuses any step past it
// (roles/scheduler/lost_worker.cc).
bool TrainJob::CalledOff(WorkerContext& ctx, int64_t step) {
  const int64_t stop = ctx.cluster->LostStep();
  return stop >= 0 && step >= stop && !ctx.cluster->LostWorkers().empty();
}

// The job counts a lost worker's batch of the last step it pushed as used
// (its gradient reached the servers it reached); the test hook's sample log
// says so on its behalf (the same line when the worker had logged it).
void TrainJob::LogLostBatches(WorkerContext& ctx, const Dataset& data, const DataRun& run,
                              TrainReport& report) const {
  const int64_t step = ctx.cluster->LostFrom() - 1;
  if (ctx.sample_log.empty() || data.sharded_by_file || ctx.rank != ChiefRank(ctx) ||
      step < run.start)  // before this plan: it was logged with the steps before the last change
    return;
  const EpochPlan& plan = run.plan;
  for (int lost : ctx.cluster->LostWorkers()) {
    Batcher theirs =
        Batcher::ForTraining(&data, config_.train.batch_size, lost, ctx.workers, config_.train.seed,
                             config_.data.shuffle, config_.train.elastic.has_value());
    theirs.RecordSampleIds(true);
    const int epoch = static_cast<int>(plan.Epoch(step));
    theirs.StartEpoch(epoch, plan.InEpoch(step), plan.RestAt(step));
    Batch batch;
    if (theirs.Next(&batch))
      report.Trained(ctx.cluster->generation(), step + 1, epoch, batch.sample_ids);
  }
}

// Batches before the plan's start were trained (a checkpoint's, or those
// of a change before it): only later ones can be the lost workers'.
StatusOr<WorkerPlace> TrainJob::PlaceWithLostBatches(WorkerContext& ctx, int64_t step,
                                                     const EpochPlan& plan) const {
  WorkerPlace place = PlaceAt(ctx, step, plan);
  const std::vector<int> lost = ctx.cluster->LostWorkers();
  const int64_t lost_from = ctx.cluster->LostFrom();
  const int64_t from = std::max(lost_from, plan.start_step);
  if (lost.empty() || lost_from < 0 || from >= step || train_samples_ < 0) return place;
  return WithUntrainedBatches(place, lost, from, train_samples_);
}

}  // namespace pstrain
