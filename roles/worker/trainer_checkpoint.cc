// TrainJob's checkpoints (roles/worker/trainer.h): when one may be taken, each
// worker's own PS state (roles/worker/ps_state.h), the chief's part
// (roles/worker/checkpointing.h), and the PS state's restore on resume.
#include <fmt/format.h>

#include <algorithm>

#include "roles/checkpoint/worker_place.h"
#include "roles/worker/checkpointing.h"
#include "roles/worker/ps_averaging.h"
#include "roles/worker/ps_compression.h"
#include "roles/worker/ps_state.h"
#include "roles/worker/trainer.h"

namespace pstrain {

bool TrainJob::CheckpointableAt(int64_t steps_done) const {
  return config_.train.mode != UpdateMode::kAverage || AverageDue(steps_done);
}

Status TrainJob::Checkpoint(WorkerContext& ctx, int64_t steps_done, const EpochPlan& plan,
                            bool wait) {
  std::vector<std::string> worker_files;
  if (HasPsWorkerState(ps_compression_.get(), ps_averaging_.get())) {
    // Each worker's own file first, then a barrier, so that every file is
    // in place before the chief's MANIFEST can list it.
    const std::string step_dir = CheckpointStepDir(config_.train.checkpoint->dir, steps_done);
    Status written = WritePsWorkerState(step_dir, ctx.rank, steps_done, ps_compression_.get(),
                                        ps_averaging_.get());
    auto all_written = ctx.cluster->AgreeMin(BarrierGroup::kWorkers, written.ok() ? 1 : 0);
    PSTRAIN_RETURN_IF_ERROR(written.WithContext(fmt::format("checkpoint of step {}", steps_done)));
    if (!all_written.ok()) return all_written.status();
    if (*all_written == 0)
      return FailedPrecondition(fmt::format(
          "checkpoint of step {}: another worker could not write its state (its log says why)",
          steps_done));
    for (int r = 0; r < ctx.workers; ++r) worker_files.push_back(PsWorkerStateFileName(r));
  }
  if (ctx.rank != ChiefRank(ctx)) return Status::OK();
  PSTRAIN_RETURN_IF_ERROR(FinishCheckpoint());  // one in flight at a time
  // A lost worker's batches it never pushed are trained at the change that
  // drops it, still ahead: the checkpoint keeps them to train.
  auto place = PlaceWithLostBatches(ctx, steps_done, plan);
  if (!place.ok())
    return place.status().WithContext(fmt::format("checkpoint of step {}", steps_done));
  auto begun = BeginCheckpoint(ctx, steps_done, &*place, allreduced_.get());
  if (!begun.ok()) return begun.status();
  checkpoint_ = std::move(*begun);
  checkpoint_->AddWorkerFiles(worker_files);
  return wait ? FinishCheckpoint() : Status::OK();
}

// Where a resumed worker's PS state comes from (roles/worker/ps_state.h):
// its own file, when the checkpoint was written by as many workers.
Status TrainJob::RestorePsWorkerState(WorkerContext& ctx, const CheckpointRef& resume,
                                      int checkpoint_workers) {
  if (resume.step == 0 || !HasPsWorkerState(ps_compression_.get(), ps_averaging_.get()))
    return Status::OK();
  const std::string name = PsWorkerStateFileName(ctx.rank);
  const bool listed =
      std::find(resume.files.begin(), resume.files.end(), name) != resume.files.end();
  if (checkpoint_workers != ctx.workers || !listed) {
    ctx.log->info("worker {}: {}; its compression residuals{} start at zero", ctx.rank,
                  listed ? fmt::format("the checkpoint was written by {} workers, this run has {}",
                                       checkpoint_workers, ctx.workers)
                         : fmt::format("{} lists no {}", resume.step_dir, name),
                  ps_averaging_ ? " and local optimizer state" : "");
    return Status::OK();
  }
  return ReadPsWorkerState(resume.step_dir + "/" + name, resume.step, ps_compression_.get(),
                           ps_averaging_.get());
}

Status TrainJob::FinishCheckpoint() {
  if (!checkpoint_) return Status::OK();
  // keep_best: pruning spares the best step and the one BEST names now
  // (until BEST names the new one: a crash between the two leaves BEST
  // naming a step that is there).
  std::vector<int64_t> spared;
  if (config_.train.checkpoint->keep_best && best_.has_best())
    spared = {best_.best_step(), best_saved_step_};
  const int64_t step = checkpoint_->step();
  Status st = checkpoint_->Finish(spared);
  checkpoint_.reset();
  // BEST is written once its step's checkpoint is complete, or, without
  // keep_best, at every checkpoint (for a resumed job's patience).
  const bool write_best = best_.watching() && best_.has_best() &&
                          (!config_.train.checkpoint->keep_best || step >= best_.best_step());
  if (st.ok() && write_best && best_saved_step_ != best_.best_step()) {
    st = best_.Save(config_.train.checkpoint->dir);
    if (st.ok()) best_saved_step_ = best_.best_step();
  }
  return st;
}

bool TrainJob::CheckpointAt(int64_t step) const {
  if (CheckpointDue(config_, step + 1, step + 1 == total_steps_)) return true;
  // keep_best: every epoch end, where the validation metric is measured.
  return config_.train.checkpoint && config_.train.checkpoint->keep_best && step == epoch_end_step_;
}

}  // namespace pstrain
