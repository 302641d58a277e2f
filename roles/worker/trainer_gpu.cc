// TrainJob on the GPU (roles/worker/trainer.h): the model's copy there, and
// NCCL among the GPU workers for the ps: false gradients.
#include <fmt/format.h>

#include <algorithm>

#include "roles/worker/remote_embeddings.h"
#include "roles/worker/trainer.h"
#include "src/gpu/gpu.h"

namespace pstrain {

Status TrainJob::StartGpu(WorkerContext& ctx) {
  auto gpu = GpuModel::Build(model_config_, model_->params(), config_.train.seed);
  if (!gpu.ok()) return gpu.status().WithContext("model.device: gpu");
  gpu_ = std::move(*gpu);
  ctx.log->info("worker {} trains on the GPU: {}", ctx.rank, GpuDescription());
  const std::vector<Param*>& params = model_->params();
  // Rows pulled from the servers land in the model's pinned memory, and go
  // up from there with no staging copy.
  for (size_t i = 0; i < params.size(); ++i) {
    if (!embeddings_->Holds(params[i])) continue;
    auto pinned = gpu_->PinTable(i);
    if (!pinned.ok()) return pinned.status().WithContext("model.device: gpu");
    embeddings_->UseRowMemory(params[i], pinned->values, pinned->grads);
  }
  // NCCL averages the dense ps: false gradients during backward; compressed
  // ones and mode average's weights go through the host ring
  // (ctx.collective) after the gradients came back, like the CPU path.
  const bool any_dense = std::any_of(params.begin(), params.end(), [this](const Param* p) {
    return allreduced_->ReducesDense(p);
  });
  if (!any_dense || ctx.workers == 1) return Status::OK();
  std::string id;
  Status made = Status::OK();
  if (ctx.rank == 0) {
    auto made_id = NcclUniqueIdBytes();
    made = made_id.status();
    if (made_id.ok()) id = *made_id;
  }
  // Every worker enters the barrier, so a failure on worker 0 fails all.
  auto shared = ctx.cluster->ShareFromOne(BarrierGroup::kWorkers, id);
  PSTRAIN_RETURN_IF_ERROR(made.WithContext("NCCL unique id"));
  if (!shared.ok()) return shared.status();
  if (shared->empty()) return Unavailable("worker 0 could not make an NCCL unique id");
  auto nccl = NcclCommunicator::Create(ctx.rank, ctx.workers, *shared, gpu_->stream());
  if (!nccl.ok()) return nccl.status().WithContext("NCCL");
  nccl_ = std::move(*nccl);
  gpu_->on_device_grads = [this, &params](size_t i, float* grad, int64_t n) -> Status {
    if (!allreduced_->ReducesDense(params[i])) return Status::OK();
    return nccl_->AllReduce(grad, n, /*average=*/true);
  };
  gpu_->reduced_on_device = [this, &params](size_t i) {
    return allreduced_->ReducesDense(params[i]);
  };
  ctx.log->info("worker {}: ps: false gradients are averaged with NCCL among {} GPU workers",
                ctx.rank, ctx.workers);
  return Status::OK();
}

}  // namespace pstrain
