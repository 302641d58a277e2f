#include "roles/node/resume.h"

#include <fmt/format.h>

#include <vector>

#include "roles/node/cluster_client.h"
#include "src/common/config/identity.h"

namespace pstrain {

StatusOr<CheckpointRef> ResumeCheckpoint(const Config& config, const Logger& log,
                                         bool rolled_back) {
  const CheckpointRef none{0, "", {}, ""};
  if (!config.train.checkpoint) return none;
  const CheckpointConfig& c = *config.train.checkpoint;
  const std::string job = JobIdentityText(config);
  if (!rolled_back) {
    PSTRAIN_RETURN_IF_ERROR(CheckWritableDirectory(c.dir).WithContext("train.checkpoint.dir"));
    if (!c.resume) {
      auto step = NewestStepDirectory(c.dir);
      if (!step.ok()) return step.status();
      if (*step < 0) return none;
      return FailedPrecondition(fmt::format(
          "train.checkpoint.dir {} already holds {} and train.checkpoint.resume is false: use a "
          "fresh directory, or set train.checkpoint.resume: true to continue from it",
          c.dir, CheckpointStepDir(c.dir, *step)));
    }
  }
  std::vector<std::string> skipped;
  // At the start the newest step must be this job's; after a rollback only
  // this job's are looked at (the start made sure there were no others).
  auto newest = FindNewestCheckpoint(c.dir, &skipped, rolled_back ? &job : nullptr);
  for (const std::string& why : skipped) log->warn("checkpoint skipped: {}", why);
  if (!newest.ok()) {
    if (newest.status().code() != StatusCode::kNotFound) return newest.status();
    log->info("no complete checkpoint of this job in {}: starting from step 0", c.dir);
    return none;
  }
  if (!newest->job.empty() && newest->job != job)
    return FailedPrecondition(fmt::format(
        "train.checkpoint.dir {} holds step {} of another job ({}): use a fresh directory for "
        "this job",
        c.dir, newest->step,
        DescribeConfigDifference(newest->job, "there", job, "in " + config.source)));
  return newest;
}

Status AgreeOnResume(ClusterClient& cluster, const CheckpointRef& found, const std::string& who) {
  auto lowest = cluster.AgreeMin(BarrierGroup::kAll, found.step);
  if (!lowest.ok()) return lowest.status();
  auto highest = cluster.AgreeMin(BarrierGroup::kAll, -found.step);
  if (!highest.ok()) return highest.status();
  if (*lowest == -*highest) return Status::OK();
  return FailedPrecondition(fmt::format(
      "{} resumes from step {} ({}), but the nodes' newest checkpoints of this job range from "
      "step {} to {}: every node must see the same checkpoint directory",
      who, found.step, found.step > 0 ? found.step_dir : "no checkpoint of this job", *lowest,
      -*highest));
}

StatusOr<int64_t> ResumeStep(const Config& config, const Logger& log) {
  auto checkpoint = ResumeCheckpoint(config, log);
  if (!checkpoint.ok()) return checkpoint.status();
  return checkpoint->step;
}

}  // namespace pstrain
