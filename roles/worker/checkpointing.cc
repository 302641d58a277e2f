#include "roles/worker/checkpointing.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "roles/checkpoint/model_layout.h"
#include "src/common/checkpoint_file.h"
#include "src/common/config/identity.h"
#include "src/data/schema_reader.h"

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

StatusOr<std::unique_ptr<CheckpointInFlight>> BeginCheckpoint(WorkerContext& ctx, int64_t step,
                                                              const WorkerPlace* place,
                                                              const AllReducedWeights* allreduced) {
  auto c = std::unique_ptr<CheckpointInFlight>(new CheckpointInFlight);
  c->ctx_ = &ctx;
  c->step_ = step;
  c->start_ = std::chrono::steady_clock::now();
  const std::string step_dir = CheckpointStepDir(ctx.config->train.checkpoint->dir, step);
  if (ctx.kv != nullptr) c->servers_ = ctx.kv->Save(step, &c->files_);
  // While the servers write, this thread writes the rest. On an error here
  // the servers are still waited for: their answers land in c->files_.
  const std::string what = fmt::format("checkpoint of step {}", step);
  auto fail = [&](const Status& st) {
    if (c->servers_) c->servers_->Wait().IgnoreError();
    return st.WithContext(what);
  };
  if (allreduced != nullptr && !allreduced->empty()) {
    auto file = allreduced->Save(step_dir, step);
    if (!file.ok()) return fail(file.status());
    c->local_files_.push_back(*file);
  }
  // The weights' names and shapes, so that the checkpoint can be read
  // without this job (pstrain export / eval): partitions carry no shapes.
  if (ctx.config->has_model) {
    auto layout = LayoutOf(*ctx.config);
    if (!layout.ok()) return fail(layout.status());
    layout->data_schema = SchemaJson(ctx.config->data);
    auto file = WriteModelLayout(step_dir, *layout);
    if (!file.ok()) return fail(file.status());
    c->local_files_.push_back(*file);
  }
  // The chief writes every worker's place: in lockstep (sync) each worker's
  // place at step N is the chief's but for the rank (same epoch, position,
  // random draws, all functions of N), and so it is in async and ssp, where
  // each worker resumes at the checkpoint's step. So no worker has to send
  // anything, or be waited for, before the MANIFEST.
  for (int r = 0; place != nullptr && r < ctx.workers; ++r) {
    WorkerPlace p = *place;
    p.rank = r;
    auto file = WriteWorkerPlace(step_dir, p);
    if (!file.ok()) return fail(file.status());
    c->local_files_.push_back(*file);
  }
  return c;
}

Status CheckpointInFlight::Finish(const std::vector<int64_t>& keep_also) {
  const std::string what = fmt::format("checkpoint of step {}", step_);
  if (servers_) PSTRAIN_RETURN_IF_ERROR(servers_->Wait().WithContext(what));
  servers_.reset();
  const CheckpointConfig& c = *ctx_->config->train.checkpoint;
  const std::string step_dir = CheckpointStepDir(c.dir, step_);
  files_.insert(files_.end(), local_files_.begin(), local_files_.end());
  const std::string job = JobIdentityText(*ctx_->config);
  PSTRAIN_RETURN_IF_ERROR(WriteManifest(c.dir, step_, files_, job));
  PSTRAIN_RETURN_IF_ERROR(PruneCheckpoints(c.dir, c.keep, &job, keep_also));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  ctx_->log->info("checkpoint of step {} written to {} in {:.3f} s ({} files, {} bytes)", step_,
                  step_dir, seconds, files_.size(), StepBytes(step_dir, files_));
  return Status::OK();
}

Status SaveCheckpoint(WorkerContext& ctx, int64_t step, const WorkerPlace* place,
                      const AllReducedWeights* allreduced) {
  auto checkpoint = BeginCheckpoint(ctx, step, place, allreduced);
  if (!checkpoint.ok()) return checkpoint.status();
  return (*checkpoint)->Finish();
}

StatusOr<WorkerPlace> ResumePlace(const CheckpointRef& resume, const WorkerPlace& now,
                                  const Logger& log, int64_t samples) {
  auto listed = [&](const std::string& name) {
    return std::find(resume.files.begin(), resume.files.end(), name) != resume.files.end();
  };
  std::string name = WorkerPlaceFileName(now.rank);
  if (!listed(name)) name = WorkerPlaceFileName(0);
  if (!listed(name)) {
    log->warn("{} lists no {}: worker {} takes its place from the step alone", resume.step_dir,
              WorkerPlaceFileName(now.rank), now.rank);
    return now;
  }
  const std::string path = resume.step_dir + "/" + name;
  auto saved = ReadWorkerPlace(path);
  if (!saved.ok()) return saved.status();
  PSTRAIN_RETURN_IF_ERROR(CheckSameRun(*saved, now, path, samples));
  return saved;
}

}  // namespace pstrain
