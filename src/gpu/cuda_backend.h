// Internal to the CUDA module: the Backend of backend.h on CUDA, cuBLAS and
// NCCL. Its calls are defined where their code lives: device.cc (the device
// and DeviceBuffer's memory), gpu_model.cc (models), nccl.cc or nccl_stub.cc
// (collectives); module_entry.cc hands it to the front.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "src/gpu/backend.h"

namespace pstrain::gpu {

class CudaBackend final : public Backend {
 public:
  Status CheckVisible() const override;
  std::string Description() const override;
  StatusOr<std::unique_ptr<ModelBackend>> BuildModel(const ModelConfig& config,
                                                     const std::vector<Param*>& params,
                                                     uint64_t seed) const override;
  StatusOr<float*> Allocate(int64_t n) const override;
  void Free(float* data) const override;
  Status CopyToDevice(float* device, const float* host, int64_t n) const override;
  Status CopyToHost(float* host, const float* device, int64_t n) const override;
  StatusOr<std::string> NcclUniqueIdBytes() const override;
  StatusOr<std::unique_ptr<CollectiveBackend>> CreateCollective(int rank, int world,
                                                                const std::string& unique_id,
                                                                GpuStream stream) const override;
};

}  // namespace pstrain::gpu
