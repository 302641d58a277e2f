#include "roles/checkpointing.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "src/common/checkpoint_file.h"

namespace pstrain {
namespace {

// Bytes of the files of a complete step, for the log.
int64_t StepBytes(const std::string& step_dir, const std::vector<std::string>& files) {
  int64_t total = 0;
  for (const std::string& f : files) {
    struct stat st;
    if (::stat((step_dir + "/" + f).c_str(), &st) == 0) total += st.st_size;
  }
  return total;
}

}  // namespace

bool CheckpointDue(const Config& config, int64_t steps_done, bool last_step) {
  if (!config.train.checkpoint || steps_done <= 0) return false;
  int64_t every = config.train.checkpoint->every_steps;
  return last_step || (every > 0 && steps_done % every == 0);
}

Status SaveCheckpoint(WorkerContext& ctx, int64_t step, const WorkerPlace* place,
                      const AllReducedWeights* allreduced) {
  const auto start = std::chrono::steady_clock::now();
  const CheckpointConfig& c = *ctx.config->train.checkpoint;
  const std::string step_dir = CheckpointStepDir(c.dir, step);
  std::vector<std::string> files;
  std::optional<KvHandle> servers;
  if (ctx.kv != nullptr) servers = ctx.kv->Save(step, &files);
  // While the servers write, this thread writes the rest; the MANIFEST
  // waits for all.
  Status local = Status::OK();
  std::vector<std::string> local_files;
  if (allreduced != nullptr && !allreduced->empty()) {
    auto file = allreduced->Save(step_dir, step);
    if (file.ok()) local_files.push_back(*file);
    local = file.status();
  }
  // The chief writes every worker's place: in lockstep (sync) each worker's
  // place at step N is the chief's but for the rank (same epoch, position,
  // random draws, all functions of N), and so it is in async and ssp, where
  // each worker resumes at the checkpoint's step. So no worker has to send
  // anything, or be waited for, before the MANIFEST.
  for (int r = 0; place != nullptr && r < ctx.workers && local.ok(); ++r) {
    WorkerPlace p = *place;
    p.rank = r;
    auto file = WriteWorkerPlace(step_dir, p);
    if (file.ok()) local_files.push_back(*file);
    local = file.status();
  }
  if (servers) {
    Status st = servers->Wait();
    if (local.ok()) local = st;
  }
  PSTRAIN_RETURN_IF_ERROR(local.WithContext(fmt::format("checkpoint of step {}", step)));
  files.insert(files.end(), local_files.begin(), local_files.end());
  PSTRAIN_RETURN_IF_ERROR(WriteManifest(c.dir, step, files));
  PSTRAIN_RETURN_IF_ERROR(PruneCheckpoints(c.dir, c.keep));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ctx.log->info("checkpoint of step {} written to {} in {:.3f} s ({} files, {} bytes)", step,
                step_dir, seconds, files.size(), StepBytes(step_dir, files));
  return Status::OK();
}

StatusOr<CheckpointRef> ResumeCheckpoint(const Config& config, const Logger& log,
                                         bool rolled_back) {
  const CheckpointRef none{0, "", {}};
  if (!config.train.checkpoint || !(config.train.checkpoint->resume || rolled_back)) return none;
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

StatusOr<WorkerPlace> ResumePlace(const CheckpointRef& resume, const WorkerPlace& now,
                                  const Logger& log) {
  const std::string name = WorkerPlaceFileName(now.rank);
  if (std::find(resume.files.begin(), resume.files.end(), name) == resume.files.end()) {
    log->warn("{} lists no {}: worker {} takes its place from the step alone", resume.step_dir,
              name, now.rank);
    return now;
  }
  const std::string path = resume.step_dir + "/" + name;
  auto saved = ReadWorkerPlace(path);
  if (!saved.ok()) return saved.status();
  PSTRAIN_RETURN_IF_ERROR(CheckSameRun(*saved, now, path));
  return saved;
}

}  // namespace pstrain
