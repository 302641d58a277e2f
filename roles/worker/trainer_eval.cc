// TrainJob's epoch ends (roles/worker/trainer.h): the chief's evaluation on
// the validation and test sets (also of a resumed finished job) and the
// early-stopping verdict every worker follows. And the totals every worker
// logs at its end.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "roles/worker/compressed_pulls.h"
#include "roles/worker/data_cache.h"
#include "roles/worker/ps_compression.h"
#include "roles/worker/remote_embeddings.h"
#include "roles/worker/train_report.h"
#include "roles/worker/trainer.h"
#include "src/data/batcher.h"
#include "src/data/dataset.h"
#include "src/data/metrics.h"
#include "src/gpu/gpu.h"
#include "src/nn/model.h"

namespace pstrain {
namespace {

// Tests only: PSTRAIN_TEST_VALIDATION_METRICS="0.5,0.7,0.6" stands for the
// validation metric of epochs 1, 2, 3 (later epochs: the measured one), so
// a test can script what early stopping sees.
std::optional<double> ScriptedValidation(int epoch) {
  const char* env = std::getenv("PSTRAIN_TEST_VALIDATION_METRICS");
  if (env == nullptr || epoch < 1) return std::nullopt;
  std::string_view rest(env);
  for (int i = 1; !rest.empty(); ++i) {
    const size_t comma = rest.find(',');
    const std::string item(rest.substr(0, comma));
    if (i == epoch) {
      char* end = nullptr;
      const double v = std::strtod(item.c_str(), &end);
      if (end == item.c_str() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
      return v;
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return std::nullopt;
}

}  // namespace

StatusOr<const Tensor*> TrainJob::Logits(const Batch& batch) {
  if (!gpu_) return &model_->Forward(batch, /*training=*/false);
  // Each evaluation batch gathers its own embedding rows: the forward
  // sends a batch's rows up itself.
  return gpu_->Forward(batch, /*training=*/false);
}

StatusOr<TestMetric> TrainJob::Measure(WorkerContext& ctx, HeldOut* set, int64_t rows_min_clock) {
  if (!set->data) {
    DataCache* cache = ctx.data_cache ? ctx.data_cache : own_data_.get();
    const bool test = std::string_view(set->which) == "test";
    auto data = test ? cache->Test(config_.data) : cache->Validation(config_.data);
    if (!data.ok()) return data.status();
    PSTRAIN_RETURN_IF_ERROR(
        CheckLoaded(reads_, config_.data, **data, set->which, ctx.log).WithContext(config_.source));
    set->data = std::move(*data);
  }
  Batcher batcher = Batcher::ForEval(set->data.get(), kEvalBatch);
  batcher.StartEpoch(0);
  Batch batch;
  TestMetric metric(config_.model.loss);
  if (gpu_) PSTRAIN_RETURN_IF_ERROR(gpu_->UploadWeights());
  while (batcher.Next(&batch)) {
    if (sparse_)
      PSTRAIN_RETURN_IF_ERROR(
          embeddings_->Gather(*sparse_, &batch, rows_min_clock, 0, /*use_cache=*/false));
    auto computed = Logits(batch);
    if (!computed.ok()) return computed.status().WithContext(set->which);
    metric.Add(**computed, batch.labels);
  }
  return metric;
}

Status TrainJob::Evaluate(WorkerContext& ctx, int epoch, int64_t rows_min_clock,
                          int64_t steps_done) {
  if (HasValidation(config_.data)) {
    auto measured = Measure(ctx, &validation_, rows_min_clock);
    if (!measured.ok()) return measured.status();
    stats_.validation_metric = measured->value();
    ctx.cluster->ReportValidation(epoch, TestMetric(config_.model.loss).name(), measured->value());
    watched_ = best_.ValueOf(*measured);
    std::string line = measured->Describe("validation");
    if (std::optional<double> scripted = ScriptedValidation(epoch)) {
      watched_ = *scripted;
      line += fmt::format("; {} {} from PSTRAIN_TEST_VALIDATION_METRICS", best_.metric(), watched_);
    }
    // Recorded once every worker has it (TrainJob::Run).
    if (steps_done >= 0 && best_.watching() && best_.WouldImprove(watched_))
      line += " (best so far)";
    ctx.log->info("epoch: {} {}", epoch, line);
  }
  if (config_.data.test.empty()) return Status::OK();
  auto measured = Measure(ctx, &test_, rows_min_clock);
  if (!measured.ok()) return measured.status();
  stats_.test_metric = measured->value();
  stats_.test_logloss = measured->logloss();
  ctx.log->info("epoch: {} {}", epoch, measured->Describe());
  return Status::OK();
}

StatusOr<bool> TrainJob::EndEpoch(WorkerContext& ctx, TrainReport& report, int epoch, int64_t step,
                                  bool last, double rate) {
  const bool evaluates = ctx.rank == ChiefRank(ctx) && HasHeldOutData();
  // The test and the job's end take the servers' exact weights.
  if (evaluates || last)
    PSTRAIN_RETURN_IF_ERROR(PullWhole(ctx.kv, ps_params_, delta_pulls_, MinClock(step)));
  if (evaluates)
    PSTRAIN_RETURN_IF_ERROR(
        Evaluate(ctx, epoch, config_.train.mode == UpdateMode::kSync ? step + 1 : 0, step + 1));
  report.EpochLine(step + 1, epoch, rate,
                   evaluates ? TestMetric(config_.model.loss).name() : nullptr,
                   config_.data.test.empty() ? -1 : stats_.test_metric,
                   HasValidation(config_.data) ? stats_.validation_metric : -1);
  // The chief's validation metric goes to every worker, so all keep the
  // same best (whichever becomes the chief) and stop together.
  if (best_.watching()) {
    auto shared = ctx.cluster->ShareFromOne(
        BarrierGroup::kWorkers, evaluates ? fmt::format("{:.17g}", watched_) : std::string());
    if (!shared.ok()) return shared.status().WithContext("sharing the validation metric");
    double value = 0;
    const char* end = shared->data() + shared->size();
    if (std::from_chars(shared->data(), end, value).ptr == end)
      best_.Record(epoch, step + 1, value);
    if (config_.train.early_stopping && !last && best_.ShouldStop()) {
      if (evaluates) ctx.log->info("early stopping after epoch {}: {}", epoch, best_.WhyStop());
      return true;
    }
  }
  return false;
}

void TrainJob::LogTotals(WorkerContext& ctx) {
  if (ps_compression_) {
    stats_.push_bytes = ps_compression_->pushed_bytes();
    stats_.push_dense_bytes = ps_compression_->dense_bytes();
    stats_.compression = ps_compression_->counters();
    if (stats_.compression.messages > 0 && stats_.steps > 0)
      ctx.log->info(
          "worker {} pushed {:.0f} bytes/step to the servers ({:.0f} dense, {:.0f}x fewer); "
          "threshold now {:.3g}..{:.3g}, density {:.3g}",
          ctx.rank, static_cast<double>(stats_.push_bytes) / stats_.steps,
          static_cast<double>(stats_.push_dense_bytes) / stats_.steps,
          static_cast<double>(stats_.push_dense_bytes) / std::max<int64_t>(stats_.push_bytes, 1),
          stats_.compression.min_tau, stats_.compression.max_tau, stats_.compression.density());
  }
  if (ctx.kv != nullptr)
    if (std::string pulls = DescribeCompressedPulls(*ctx.kv, ctx.rank, stats_.steps);
        !pulls.empty())
      ctx.log->info("{}", pulls);
  const double step_s = std::max(stats_.compute_s + stats_.comm_s, 1e-9);
  ctx.log->info(
      "worker {} finished {} steps in {:.1f} s: {:.0f} samples/s, {:.0f}% of step time "
      "communicating, last loss {:.6f}",
      ctx.rank, stats_.steps, stats_.seconds,
      static_cast<double>(stats_.samples) / std::max(stats_.seconds, 1e-9),
      100.0 * stats_.comm_s / step_s, stats_.last_loss);
  if (gpu_) {
    ctx.log->info(
        "worker {} on the GPU: {:.1f}% of step time in host-device copies ({:.1f} KiB a step)",
        ctx.rank, 100.0 * stats_.copy_s / step_s,
        static_cast<double>(stats_.copy_bytes) / 1024 / std::max<int64_t>(stats_.steps, 1));
  }
}

}  // namespace pstrain
