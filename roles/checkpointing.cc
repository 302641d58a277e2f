#include "roles/checkpointing.h"

#include <fmt/format.h>

#include "src/common/checkpoint_file.h"

namespace pstrain {

bool CheckpointDue(const Config& config, int64_t steps_done, bool last_step) {
  if (!config.train.checkpoint || steps_done <= 0) return false;
  int64_t every = config.train.checkpoint->every_steps;
  return last_step || (every > 0 && steps_done % every == 0);
}

Status SaveCheckpoint(WorkerContext& ctx, int64_t step, const AllReducedWeights* allreduced) {
  const CheckpointConfig& c = *ctx.config->train.checkpoint;
  std::vector<std::string> files;
  if (ctx.kv != nullptr) PSTRAIN_RETURN_IF_ERROR(ctx.kv->Save(step, &files).Wait());
  if (allreduced != nullptr && !allreduced->empty()) {
    auto file = allreduced->Save(CheckpointStepDir(c.dir, step), step);
    if (!file.ok()) return file.status();
    files.push_back(*file);
  }
  PSTRAIN_RETURN_IF_ERROR(WriteManifest(c.dir, step, files));
  PSTRAIN_RETURN_IF_ERROR(PruneCheckpoints(c.dir, c.keep));
  ctx.log->info("checkpoint of step {} written to {}", step, CheckpointStepDir(c.dir, step));
  return Status::OK();
}

StatusOr<CheckpointRef> ResumeCheckpoint(const Config& config, const Logger& log) {
  const CheckpointRef none{0, "", {}};
  if (!config.train.checkpoint || !config.train.checkpoint->resume) return none;
  auto newest = FindNewestCheckpoint(config.train.checkpoint->dir);
  if (!newest.ok()) {
    if (newest.status().code() == StatusCode::kNotFound) return none;
    return newest.status();
  }
  log->info("resuming at step {} from {}", newest->step, newest->step_dir);
  return newest;
}

StatusOr<int64_t> ResumeStep(const Config& config, const Logger& log) {
  auto checkpoint = ResumeCheckpoint(config, log);
  if (!checkpoint.ok()) return checkpoint.status();
  return checkpoint->step;
}

}  // namespace pstrain
