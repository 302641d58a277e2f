// TrainJob's evaluation on the test set (roles/worker/trainer.h): the chief
// runs it at epoch ends and on a resumed finished job. And the totals every
// worker logs at its end.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "roles/worker/compressed_pulls.h"
#include "roles/worker/data_cache.h"
#include "roles/worker/ps_compression.h"
#include "roles/worker/remote_embeddings.h"
#include "roles/worker/trainer.h"
#include "src/data/batcher.h"
#include "src/data/dataset.h"
#include "src/data/metrics.h"
#include "src/gpu/gpu.h"
#include "src/nn/model.h"

namespace pstrain {

StatusOr<const Tensor*> TrainJob::Logits(const Batch& batch) {
  if (!gpu_) return &model_->Forward(batch, /*training=*/false);
  // Each evaluation batch gathers its own embedding rows: the forward
  // sends a batch's rows up itself.
  return gpu_->Forward(batch, /*training=*/false);
}

Status TrainJob::Evaluate(WorkerContext& ctx, int epoch, int64_t rows_min_clock) {
  if (!test_) {
    auto test = (ctx.data_cache ? ctx.data_cache : own_data_.get())->Test(config_.data);
    if (!test.ok()) return test.status();
    const DataFiles files = DataFilesOf(config_.data.format, config_.data.test, "test");
    PSTRAIN_RETURN_IF_ERROR(
        CheckFit(reads_, **test, files.features, files.labels).WithContext(config_.source));
    test_ = std::move(*test);
  }
  Batcher batcher = Batcher::ForEval(test_.get(), kEvalBatch);
  batcher.StartEpoch(0);
  Batch batch;
  TestMetric metric(config_.model.loss);
  if (gpu_) PSTRAIN_RETURN_IF_ERROR(gpu_->UploadWeights());
  while (batcher.Next(&batch)) {
    if (sparse_)
      PSTRAIN_RETURN_IF_ERROR(
          embeddings_->Gather(*sparse_, &batch, rows_min_clock, 0, /*use_cache=*/false));
    auto computed = Logits(batch);
    if (!computed.ok()) return computed.status().WithContext("evaluation");
    metric.Add(**computed, batch.labels);
  }
  stats_.test_metric = metric.value();
  stats_.test_logloss = metric.logloss();
  ctx.log->info("epoch: {} {}", epoch, metric.Describe());
  return Status::OK();
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
