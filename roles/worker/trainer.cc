#include "roles/worker/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "comm/ps/sparse_client.h"
#include "optim/optimizer_kernel.h"
#include "roles/checkpoint/worker_place.h"
#include "roles/placement/placed_model.h"
#include "roles/worker/checkpointing.h"
#include "roles/worker/compressed_pulls.h"
#include "roles/worker/data_cache.h"
#include "roles/worker/data_run.h"
#include "roles/worker/grow.h"
#include "roles/worker/norm_clip.h"
#include "roles/worker/ps_averaging.h"
#include "roles/worker/ps_compression.h"
#include "roles/worker/remote_embeddings.h"
#include "roles/worker/train_report.h"
#include "src/data/batcher.h"
#include "src/data/dataset.h"
#include "src/data/metrics.h"
#include "src/data/prefetcher.h"
#include "src/gpu/gpu.h"
#include "src/nn/model.h"

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;

// `path` made absolute for the log (as written if that fails).
std::string AbsolutePath(const std::string& path) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  return error ? path : absolute.lexically_normal().string();
}

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Mode average's limits, refused at start with the line to change.
Status CheckAveraging(const Config& config, const RemoteEmbeddings& embeddings) {
  const int64_t every = config.train.average_every;
  // A table's rows are touched by a few workers each step: no clean rule
  // averages a row some workers never saw, so tables keep sync.
  if (!embeddings.empty())
    return InvalidArgument(fmt::format(
        "{}: train.mode: average does not take server-held embedding tables (init_in_server); "
        "use mode sync, async or ssp",
        config.source));
  if (config.train.checkpoint && config.train.checkpoint->every_steps % every != 0)
    return InvalidArgument(fmt::format(
        "{}: train.checkpoint.every_steps {} is not a multiple of train.average_every {}: "
        "with mode average a checkpoint is taken only when the weights were just averaged",
        config.source, config.train.checkpoint->every_steps, every));
  return Status::OK();
}

}  // namespace

StatusOr<std::unique_ptr<TrainJob>> TrainJob::Create(const Config& config) {
  if (!config.has_model)
    return InvalidArgument(fmt::format("{}: no model: section", config.source));
  if (!config.has_data) return InvalidArgument(fmt::format("{}: no data: section", config.source));
  if (config.model.device == Device::kGpu) {
    // Refused at start-up, before any data is read or any node joins.
    PSTRAIN_RETURN_IF_ERROR(CheckGpuModelSupported(config.model).WithContext(config.source));
    PSTRAIN_RETURN_IF_ERROR(CheckGpuVisible().WithContext(config.source));
  }
  std::unique_ptr<TrainJob> job(new TrainJob(config));
  auto placed = PlaceModel(config, std::max(config.train.batch_size, kEvalBatch));
  if (!placed.ok()) return placed.status();
  auto embeddings = RemoteEmbeddings::Create(*placed, config.train.mode);
  if (!embeddings.ok()) return embeddings.status().WithContext(config.source);
  job->embeddings_ = std::move(*embeddings);
  job->model_ = std::move(placed->model);
  job->model_config_ = std::move(placed->model_config);
  job->reads_ = ModelReadsOf(config.model, job->model_->output_shape());
  job->ps_params_ = placed->ParamsAt(ParamPlace::kServers);
  job->delta_pulls_ = CompressedPulls(config, job->ps_params_);
  std::vector<Param*> allreduced = placed->ParamsAt(ParamPlace::kAllReduced);
  auto weights = AllReducedWeights::Create(config, std::move(allreduced));
  if (!weights.ok()) return weights.status().WithContext(config.source);
  job->allreduced_ = std::move(*weights);
  if (config.train.mode == UpdateMode::kAverage) {
    PSTRAIN_RETURN_IF_ERROR(CheckAveraging(config, *job->embeddings_));
    auto averaging = PsAveraging::Create(config, job->ps_params_);
    if (!averaging.ok()) return averaging.status().WithContext(config.source);
    job->ps_averaging_ = std::move(*averaging);
  }
  return job;
}

TrainJob::TrainJob(const Config& config)
    : config_(config),
      steps_can_be_called_off_(config.train.elastic.has_value() &&
                               FinishesStepsWithoutLostWorkers(config)),
      clip_(config.train.clip_norm > 0 ? std::make_unique<NormClip>(config.train.clip_norm)
                                       : nullptr),
      reduced_applied_late_(steps_can_be_called_off_ || clip_ != nullptr),
      best_(config),
      own_data_(std::make_unique<DataCache>()) {}
TrainJob::~TrainJob() = default;

bool TrainJob::NeedsCollective() { return !allreduced_->empty(); }

Status TrainJob::CheckData() const {
  return CheckFirstBatches(config_.data, reads_, config_.train.batch_size)
      .WithContext(config_.source);
}

std::vector<TensorSpec> TrainJob::PsTensors() {
  std::vector<TensorSpec> specs;
  for (const Param* p : ps_params_) specs.push_back({p->name, p->value.size()});
  return specs;
}

std::vector<std::vector<float>> TrainJob::Weights() const {
  std::vector<std::vector<float>> out;
  for (const Param* p : model_->params())
    out.push_back(embeddings_ && embeddings_->Holds(p)
                      ? embeddings_->RowsInUse(*p)
                      : std::vector<float>(p->value.data.begin(), p->value.data.end()));
  return out;
}

WorkerPlace TrainJob::PlaceAt(const WorkerContext& ctx, int64_t step, const EpochPlan& plan) const {
  WorkerPlace p;
  p.step = step;
  p.rank = ctx.rank;
  p.workers = ctx.workers;
  p.batch_size = config_.train.batch_size;
  p.seed = config_.train.seed;
  p.shuffle = config_.data.shuffle;
  p.steps_per_epoch = plan.steps_per_epoch;
  p.epoch = plan.Epoch(step);
  p.position = plan.InEpoch(step);
  p.epoch_start = plan.RestStart(step);
  p.skip_samples = plan.SkipAt(step);
  p.make_up = plan.RestAt(step).make_up;
  p.training_forwards = training_forwards_;
  std::vector<std::string> names;
  for (const Param* param : model_->params())
    if (param->trainable) names.push_back(param->name);  // a statistic follows no schedule
  p.lr_schedule = LrScheduleText(config_, names);
  return p;
}

int64_t TrainJob::MinClock(int64_t step) const {
  switch (config_.train.mode) {
    case UpdateMode::kSync:
      return step + 1;
    case UpdateMode::kAsync:
      return 0;
    case UpdateMode::kSsp:
      return std::max<int64_t>(0, step + 1 - config_.train.staleness);
    case UpdateMode::kAverage:  // the servers' clock counts rounds (roles/worker/ps_averaging.h)
      return step / config_.train.average_every + 1;
  }
  return 0;
}

// The chief's initial weights go to the servers once (a restored checkpoint
// keeps its own); everyone then pulls, waiting for the chief if need be. The
// all-reduced weights come from the chief (its checkpoint file on resume; a
// worker joining live gets them from the chief's memory, at `step`).
Status TrainJob::InitWeights(WorkerContext& ctx, const CheckpointRef& resume, int64_t step) {
  if (!allreduced_->empty()) {
    if (ctx.rank == 0 && resume.step > 0)
      PSTRAIN_RETURN_IF_ERROR(allreduced_->Load(resume.step_dir, resume.step));
    PSTRAIN_RETURN_IF_ERROR(allreduced_->BroadcastFromChief(*ctx.collective, step));
  }
  const std::vector<Param*>& params = ps_params_;
  if (params.empty()) return Status::OK();
  std::vector<KvOp> ops;
  if (ctx.rank == 0) {
    for (size_t t = 0; t < params.size(); ++t)
      ops.push_back({KvOp::Kind::kInit, static_cast<int>(t), params[t]->value.ptr(), 0});
    PSTRAIN_RETURN_IF_ERROR(ctx.kv->Run(ops).Wait().WithContext("initial weights"));
    ops.clear();
  }
  for (size_t t = 0; t < params.size(); ++t) {
    ops.push_back({KvOp::Kind::kPull, static_cast<int>(t), params[t]->value.ptr(), 0});
    ops.back().delta = delta_pulls_[t];
  }
  ctx.kv->ForgetDeltaPulls();  // a rejoin's or a recovery's copy is dense again
  return ctx.kv->Run(ops).Wait().WithContext("initial pull");
}

StatusOr<float> TrainJob::ComputeGradients(const Batch& batch) {
  ++training_forwards_;
  if (!gpu_) {
    model_->Forward(batch, /*training=*/true);
    return model_->Backward(batch);
  }
  const double copied = gpu_->CopySeconds();
  const int64_t bytes = gpu_->CopiedBytes();
  PSTRAIN_RETURN_IF_ERROR(gpu_->UploadWeights());
  auto logits = gpu_->Forward(batch, /*training=*/true);
  if (!logits.ok()) return logits.status();
  auto loss = gpu_->Backward(batch);
  stats_.copy_s += gpu_->CopySeconds() - copied;
  stats_.copy_bytes += gpu_->CopiedBytes() - bytes;
  return loss;
}

// What goes on while the dense push and pull are in flight: the embedding
// rows' gradients go to their servers, and the all-reduced weights are
// averaged (dense ones by NCCL during backward on the GPU; compressed ones
// all-gathered; mode average: the weights, when due) and updated, but in a
// job whose steps can be called off (steps_can_be_called_off_): there the update
// waits for the servers' answer (Step).
Status TrainJob::ExchangeLocalState(WorkerContext& ctx, int64_t step) {
  Clock::time_point start = Clock::now();
  if (sparse_) PSTRAIN_RETURN_IF_ERROR(embeddings_->Scatter(*sparse_, step));
  stats_.push_s += Since(start);
  if (allreduced_->empty()) return Status::OK();
  start = Clock::now();
  Status st = allreduced_->Reduce(*ctx.collective, /*dense_reduced=*/nccl_ != nullptr);
  if (st.ok() && !reduced_applied_late_)
    st = allreduced_->ApplyReduced(*ctx.collective, AverageDue(step + 1));
  // A checkpoint after this step saves every worker's residuals too.
  const bool checkpoint_due = CheckpointAt(step);
  if (st.ok() && checkpoint_due) st = allreduced_->GatherEncoderStates(*ctx.collective, step + 1);
  // The chief evaluates and saves the workers' mean statistics (a round of
  // mode average has just averaged them with the weights).
  const bool statistics_due = checkpoint_due || step == epoch_end_step_;
  if (st.ok() && statistics_due && allreduced_->has_statistics() && !AverageDue(step + 1))
    st = allreduced_->AverageStatistics(*ctx.collective);
  stats_.allreduce_s += Since(start);
  const bool saves = allreduced_->averaging() || allreduced_->compression_counters().messages > 0;
  if (st.ok() && saves && (step + 1) % config_.train.log_every == 0) {
    const AllReducedWeights::Traffic now = allreduced_->traffic();
    ctx.log->info("{}", allreduced_->DescribeTraffic(logged_traffic_, now));
    logged_traffic_ = now;
  }
  return st;
}

// Mode average: a round of averaging (the ps: false copies all-reduced, the
// PS weights' deltas pushed and averaged on the servers) every
// average_every steps and after the last step. One rule for both paths and
// for checkpoints, which are written only right after a round, where every
// worker holds the same weights. Between rounds the chief evaluates its own
// copy. Every worker reaches the same answer (same config, same total).
bool TrainJob::AverageDue(int64_t steps_done) const {
  if (config_.train.mode != UpdateMode::kAverage) return false;
  return steps_done % config_.train.average_every == 0 || steps_done == total_steps_;
}

TrainCounters TrainJob::Counters(const WorkerContext& ctx) const {
  TrainCounters c;
  c.samples = stats_.samples;
  c.compute_s = stats_.compute_s;
  c.push_s = stats_.push_s;
  c.pull_s = stats_.pull_s;
  c.allreduce_s = stats_.allreduce_s;
  c.bytes_sent = ctx.loop != nullptr ? ctx.loop->bytes_sent() : 0;
  c.bytes_received = ctx.loop != nullptr ? ctx.loop->bytes_received() : 0;
  const auto counts = embeddings_->counts();
  c.cache_ids = counts.ids;
  c.cache_hits = counts.hits;
  if (ps_compression_) {
    c.push_bytes = ps_compression_->pushed_bytes();
    c.push_dense_bytes = ps_compression_->dense_bytes();
    c.compression = ps_compression_->counters();
  }
  // The all-reduced weights' threshold messages count in the threshold and
  // density; their bytes have a progress line of their own (not pushes).
  c.compression.Add(allreduced_->compression_counters());
  c.grad_norm = stats_.grad_norm;
  c.clipped_steps = stats_.clipped_steps;
  return c;
}

// Servers count updates, not steps: in sync mode one per step, otherwise
// one per worker's push.
double TrainJob::LrAt(int64_t step, int workers) const {
  // Mode average: each worker's own optimizer steps once per step.
  const bool per_step =
      config_.train.mode == UpdateMode::kSync || config_.train.mode == UpdateMode::kAverage;
  const uint64_t updates = per_step ? static_cast<uint64_t>(step)
                                    : static_cast<uint64_t>(step) * static_cast<uint64_t>(workers);
  return OptimizerKernel(config_.train.optimizer).ScheduledLr(updates);
}

Status TrainJob::Step(WorkerContext& ctx, Batch& batch, int64_t step, const Batch* next) {
  Clock::time_point start = Clock::now();
  if (sparse_) {
    // The rows must include the updates a dense pull would see at this step.
    const int64_t min_clock = config_.train.mode == UpdateMode::kSync    ? step
                              : config_.train.mode == UpdateMode::kAsync ? 0
                                                                         : MinClock(step - 1);
    PSTRAIN_RETURN_IF_ERROR(embeddings_->Gather(*sparse_, &batch, min_clock, step)
                                .WithContext(fmt::format("step {}", step + 1)));
    if (next != nullptr) embeddings_->StartPrefetch(next->sparse, step);
    stats_.pull_s += Since(start);
    stats_.comm_s += Since(start);
    start = Clock::now();
  }
  auto loss = ComputeGradients(batch);
  if (!loss.ok()) return loss.status().WithContext(fmt::format("step {}", step + 1));
  stats_.last_loss = *loss;
  if (!std::isfinite(stats_.last_loss))
    return FailedPrecondition(
        fmt::format("the loss is {} at step {}: training diverged (lower train.optimizer.lr?)",
                    stats_.last_loss, step + 1));
  stats_.compute_s += Since(start);
  start = Clock::now();
  // The PS traffic goes out first and flies while the ring all-reduces.
  std::vector<KvOp> ops = PsRequests(ctx, step);
  std::optional<KvHandle> pushed_and_pulled;
  if (!ops.empty()) pushed_and_pulled = ctx.kv->Run(std::move(ops));
  stats_.push_s += Since(start);
  Status st = ExchangeLocalState(ctx, step);
  // The all-reduced update waits for the servers' answer where a step they
  // call off is trained again (it must not be applied twice), or for the
  // step's clip factor.
  bool apply_reduced = st.ok() && !allreduced_->empty() && reduced_applied_late_;
  if (!st.ok() && !allreduced_->empty()) st = AfterRingLost(ctx, step, st);
  if (pushed_and_pulled) {
    const Clock::time_point waited = Clock::now();
    Status kv = pushed_and_pulled->Wait();
    stats_.pull_s += Since(waited);
    if (st.ok()) st = kv;
    if (kv.ok()) AfterPsRequests(step);
    apply_reduced = apply_reduced && kv.ok();
  }
  if (clip_ && st.ok()) st = Clip(ctx, step);
  apply_reduced = apply_reduced && st.ok();
  if (apply_reduced) {
    const Clock::time_point applied = Clock::now();
    Status applied_st = allreduced_->ApplyReduced(*ctx.collective, AverageDue(step + 1));
    stats_.allreduce_s += Since(applied);
    if (st.ok()) st = applied_st;
  }
  stats_.comm_s += Since(start);
  ++stats_.steps;
  stats_.samples += batch.size();
  return st.WithContext(fmt::format("step {}", step + 1));
}

Status TrainJob::Run(WorkerContext& ctx) {
  if (ctx.kv == nullptr && !ps_params_.empty())
    return FailedPrecondition("training needs at least one server");
  if (!embeddings_->empty()) {
    if (ctx.servers.empty())
      return FailedPrecondition("server-held embedding tables need at least one server");
    auto make_client = [&ctx] {
      auto client = std::make_unique<SparseClient>(ctx.loop, ctx.servers, ctx.rank);
      if (ctx.routes) client->EnableFailover(ctx.routes, ctx.failover_patience);
      return client;
    };
    sparse_ = make_client();
    if (embeddings_->CanPrefetch()) embeddings_->EnablePrefetch(make_client());
  }
  if (ctx.rank == 0 && ctx.cluster->generation() == 0) {
    const std::string unused = RemoteEmbeddings::UnusedCacheWarning(config_);
    if (!unused.empty()) ctx.log->warn("{}", unused);
  }
  if (ctx.collective == nullptr && !allreduced_->empty())
    return FailedPrecondition("all-reduced (ps: false) weights need the workers' ring");
  if (ctx.data_cache == nullptr) ctx.data_cache = own_data_.get();
  auto loaded = ctx.data_cache->Train(config_.data, ctx.rank, ctx.workers);
  if (!loaded.ok()) return loaded.status();
  const std::shared_ptr<const Dataset> data = std::move(*loaded);
  train_samples_ = data->sharded_by_file ? -1 : data->size();
  // The first batches were checked at start; this is every sample.
  PSTRAIN_RETURN_IF_ERROR(
      CheckLoaded(reads_, config_.data, *data, "train", ctx.log).WithContext(config_.source));
  if (ctx.rank == 0 && config_.train.checkpoint && ctx.cluster->generation() == 0)
    ctx.log->info("checkpoints: {} (resolved from the config's directory when relative)",
                  AbsolutePath(config_.train.checkpoint->dir));
  // Agreed on by every node (worker.cc); one that joined live starts at the chief's.
  const CheckpointRef* resume = &ctx.resume;
  const int64_t start_step = ctx.joined_at ? ctx.joined_at->step : resume->step;
  ctx.cluster->StartingAt(start_step);
  auto planned = MakeDataRun(ctx, data, start_step);
  if (!planned.ok()) return planned.status();
  DataRun run = std::move(*planned);
  // Where this worker's data and random draws continue: its place as the
  // checkpoint saved it, once checked against this run's config and data,
  // or the chief's when it joined live; the epochs from there (re-sharded
  // when the worker count changed).
  WorkerPlace start = PlaceAt(ctx, start_step, run.plan);
  if (start_step > 0) {
    auto place = ctx.joined_at ? StatusOr<WorkerPlace>(*ctx.joined_at)
                               : ResumePlace(*resume, start, ctx.log,
                                             data->sharded_by_file ? -1 : data->size());
    if (!place.ok()) return place.status();
    PSTRAIN_RETURN_IF_ERROR(
        ContinueFrom(ctx, *data, *place, /*live=*/ctx.joined_at.has_value(), &run));
    start = *place;
  }
  const int64_t total = run.total;
  if (start_step < total) ctx.cluster->PlannedRestFrom(start_step, run.plan.RestStart(start_step));
  training_forwards_ = start.training_forwards;
  model_->SetTrainingForwards(training_forwards_);
  total_steps_ = total;  // a live change of workers sets it again
  PSTRAIN_RETURN_IF_ERROR(InitWeights(ctx, *resume, start_step));
  // A resumed job's patience counts from the best its checkpoints recorded.
  if (start_step > 0 && config_.train.checkpoint && HasValidation(config_.data))
    if (Status st = best_.Restore(config_.train.checkpoint->dir, start_step,
                                  static_cast<int>(run.plan.Epoch(start_step - 1) + 1));
        !st.ok())
      ctx.log->warn("{}: ignored, the best validation metric is counted afresh", st.message());
  if (!ps_params_.empty()) {
    // Mode average pushes weight deltas, dense: only gradients are encoded.
    ps_compression_ = std::make_unique<PsCompression>(config_, ctx.kv->map(),
                                                      /*encode=*/!ps_averaging_);
  }
  if (ps_averaging_) ps_averaging_->Anchor(start_step);
  PSTRAIN_RETURN_IF_ERROR(RestorePsWorkerState(ctx, *resume, start.workers));
  if (config_.model.device == Device::kGpu) {
    PSTRAIN_RETURN_IF_ERROR(StartGpu(ctx));
    gpu_->SetTrainingForwards(training_forwards_);
  }
  if (start_step > 0 && start_step >= total) {
    // Resuming a finished job: nothing to train, but the user came for the
    // model, so the chief shows its test metric (as `pstrain eval` would).
    ctx.log->info(
        "worker {}: the checkpoint {} is at step {}, the job's last ({} steps): nothing left to "
        "train{}",
        ctx.rank, resume->step_dir, start_step, total,
        ctx.rank != 0 || !HasHeldOutData() ? ""
        : config_.data.test.empty()        ? "; evaluating it on the validation set"
                                           : "; evaluating it on the test set");
    if (ctx.rank == 0 && HasHeldOutData())
      PSTRAIN_RETURN_IF_ERROR(Evaluate(ctx, static_cast<int>(run.plan.Epoch(start_step - 1) + 1)));
    return Status::OK();
  }
  ctx.log->info("worker {} trains {} steps ({} per epoch, batch {}) on {} samples", ctx.rank,
                total - start_step, run.plan.steps_per_epoch, config_.train.batch_size,
                data->size());

  TrainReport report(ctx.log_dir, ctx.rank, ctx.log, embeddings_->HasCache(), start_step,
                     run.total);
  if (!ctx.sample_log.empty()) PSTRAIN_RETURN_IF_ERROR(report.OpenSampleLog(ctx.sample_log));
  Clock::time_point begin = Clock::now(), epoch_begin = begin;
  int64_t epoch_samples = 0;
  Batch batch, next;
  bool have_next = false;  // `next` holds the batch after `batch`
  const bool look_ahead = sparse_ && embeddings_->CanPrefetch();
  int64_t stopped_at = -1;     // stopped on request before this step
  std::vector<int> slots;      // of a live change of the servers
  int64_t called_off = -1;     // the step last called off (a worker was lost)
  bool left = false;           // left the job live at stopped_at
  int64_t stopped_early = -1;  // train.early_stopping ended the job after this step
  for (int64_t step = start_step; step < run.total; ++step) {
    // Where the next step's epoch rest began: how far back a lost worker's
    // batches can be made up there (roles/scheduler/lost_worker.cc).
    const int64_t next_rest_from = step + 1 < run.total ? run.plan.RestStart(step + 1) : -1;
    if (!ctx.cluster->BeginStep(step, next_rest_from)) {
      stopped_at = step;
      break;
    }
    if (const int servers = ctx.cluster->GrowsAt(step, &slots); servers > 0)
      PSTRAIN_RETURN_IF_ERROR(
          ChangeServers(ctx, step, servers, slots, sparse_.get(), embeddings_.get()));
    if (auto change = ctx.cluster->WorkersChangeAt(step); change.workers > 0) {
      LogLostBatches(ctx, *data, run, report);
      auto stays = ChangeWorkers(ctx, step, change, data, &run);
      if (!stays.ok()) return stays.status();
      if (!*stays) {
        left = true;
        stopped_at = step;
        break;
      }
      report.SetTotal(run.total);
      if (step + 1 < run.total)
        ctx.cluster->PlannedRestFrom(step + 1, run.plan.RestStart(step + 1));
    }
    const EpochPlan& plan = run.plan;
    const int epoch = static_cast<int>(plan.Epoch(step));
    const int64_t in_epoch = plan.InEpoch(step);
    const int64_t epoch_steps = plan.EpochSteps(epoch);
    if (in_epoch == 0 || step == run.start) {
      if (step == run.start) {
        run.batcher->StartEpoch(epoch, plan.first_done, plan.RestAt(step));
      } else {
        run.batcher->StartEpoch(epoch);
      }
      epoch_begin = Clock::now();
      epoch_samples = 0;
      have_next = false;
      // Compression's warm-up goes by epochs (ThresholdEncoder::SetEpoch).
      if (ps_compression_) ps_compression_->SetEpoch(epoch);
      allreduced_->SetEpoch(epoch);
    }
    if (have_next) {
      std::swap(batch, next);
      have_next = false;
    } else if (!run.batcher->Next(&batch)) {
      PSTRAIN_RETURN_IF_ERROR(run.batcher->status().WithContext(fmt::format("step {}", step + 1)));
      return Internal(fmt::format("worker {} ran out of batches at step {}", ctx.rank, step + 1));
    }
    // The next batch's embedding rows are pulled while this one computes.
    if (look_ahead && in_epoch + 1 < epoch_steps && step + 1 < run.total)
      have_next = run.batcher->Next(&next);
    epoch_end_step_ = in_epoch + 1 == epoch_steps || step + 1 == run.total ? step : -1;
    if (Status st = Step(ctx, batch, step, have_next ? &next : nullptr); !st.ok()) {
      // Called off: the job goes on without the lost worker from this step,
      // which is trained again after that change (once).
      if (!CalledOff(ctx, step) || called_off == step) return st;
      ctx.log->info("worker {}: step {} was called off: a worker was lost ({})", ctx.rank, step + 1,
                    st.message());
      called_off = step--;
      continue;
    }
    epoch_samples += batch.size();
    report.Trained(ctx.cluster->generation(), step + 1, epoch, batch.sample_ids);
    const bool last = step + 1 == run.total;
    const TrainCounters counters = Counters(ctx);
    report.AfterStep(step + 1, counters);
    if ((step + 1) % config_.train.log_every == 0 || last)
      report.WriteStep(step + 1, epoch + 1, stats_.last_loss, LrAt(step, ctx.workers), counters);
    // The scheduler's live view (roles/scheduler/view.h) shows where each worker is.
    ctx.cluster->ReportProgress(step + 1, static_cast<double>(epoch_samples) / Since(epoch_begin));
    if ((in_epoch + 1) % config_.train.log_every == 0 || in_epoch == 0) {
      ctx.log->info("epoch: {} step: {}, loss is {:.6f}{}", epoch + 1, in_epoch + 1,
                    stats_.last_loss, report.LogSuffix(step + 1, counters));
      if (sparse_) {
        ctx.log->info("embedding rows: {}", embeddings_->DescribeSinceLast());
      }
    }
    if (checkpoint_ && checkpoint_->ServersDone()) PSTRAIN_RETURN_IF_ERROR(FinishCheckpoint());
    if (CheckpointAt(step) && CheckpointableAt(step + 1))
      PSTRAIN_RETURN_IF_ERROR(Checkpoint(ctx, step + 1, plan, /*wait=*/false));
    if (in_epoch + 1 == epoch_steps || last) {
      double seconds = Since(epoch_begin);
      const double rate = static_cast<double>(epoch_samples) / seconds;
      ctx.log->info("epoch: {} done: {:.0f} samples/s on this worker ({} workers)", epoch + 1, rate,
                    ctx.workers);
      auto stop = EndEpoch(ctx, report, epoch + 1, step, last, rate);
      if (!stop.ok()) return stop.status();
      if (*stop) {
        stopped_early = step + 1;
        break;
      }
    }
  }
  report.Finish();
  // An early stop is the job's end: its step is checkpointed as a last one.
  if (stopped_early > 0 && config_.train.checkpoint && !CheckpointAt(stopped_early - 1) &&
      CheckpointableAt(stopped_early))
    PSTRAIN_RETURN_IF_ERROR(Checkpoint(ctx, stopped_early, run.plan, /*wait=*/true));
  PSTRAIN_RETURN_IF_ERROR(FinishCheckpoint());
  if (left) {
    ctx.log->info("worker {} left the job after step {}: the others go on without it", ctx.rank,
                  stopped_at);
  } else if (stopped_at >= 0) {
    // Every worker stopped here: what the job did so far is kept, unless the
    // last periodic checkpoint already holds it.
    if (config_.train.checkpoint && stopped_at > start_step && !CheckpointAt(stopped_at - 1) &&
        CheckpointableAt(stopped_at))
      PSTRAIN_RETURN_IF_ERROR(Checkpoint(ctx, stopped_at, run.plan, /*wait=*/true));
    ctx.log->info("worker {} stopped on request after step {} of {}", ctx.rank, stopped_at,
                  run.total);
    if (ctx.rank == ChiefRank(ctx) && config_.train.checkpoint && !CheckpointableAt(stopped_at))
      ctx.log->info(
          "no checkpoint of step {}: mode average checkpoints only where a round of averaging "
          "ended (every {} steps); the newest stays the job's resume point",
          stopped_at, config_.train.average_every);
  }
  stats_.seconds = Since(begin);
  LogTotals(ctx);
  return Status::OK();
}

}  // namespace pstrain
