// Internal to src/gpu: the interface between the front (gpu_front.cc, linked
// into every binary) and the CUDA module (libpstrain_cuda.so, the only code
// that links CUDA, cuBLAS and NCCL). The front opens the module with dlopen
// the first time a call needs a device (module_loader.h), so a process that
// never asks for a GPU never maps CUDA's libraries.
//
// Both sides are compiled from one source tree and pass C++ types (Status,
// std::string, ModelConfig, Batch) by reference: the entry point refuses a
// module built from another tree (BuildKey), so a layout mismatch cannot go
// unnoticed.
//
// Threads: the Backend is one immutable object for the process, safe from
// any thread; a ModelBackend and a CollectiveBackend belong to the thread of
// the GpuModel and NcclCommunicator that hold them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/common/status.h"
#include "src/gpu/gpu.h"

namespace pstrain::gpu {

// What GpuModel forwards to (gpu.h documents each call).
class ModelBackend {
 public:
  virtual ~ModelBackend() = default;
  virtual Status UploadWeights() = 0;
  virtual StatusOr<GpuModel::PinnedTable> PinTable(size_t index) = 0;
  virtual StatusOr<const Tensor*> Forward(const Batch& batch, bool training) = 0;
  virtual StatusOr<float> Backward(
      const Batch& batch, const std::function<Status(size_t, float*, int64_t)>& on_device_grads,
      const std::function<bool(size_t)>& reduced_on_device) = 0;
  virtual GpuStream stream() const = 0;
  virtual double CopySeconds() const = 0;
  virtual int64_t CopiedBytes() const = 0;
  virtual void SetTrainingForwards(uint64_t done) = 0;
};

// What NcclCommunicator forwards to.
class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual Status AllReduce(float* device_data, int64_t n, bool average) = 0;
  virtual Status Broadcast(float* device_data, int64_t n, int root) = 0;
  virtual Status Synchronize() = 0;
};

// Everything of gpu.h that needs CUDA.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Status CheckVisible() const = 0;
  virtual std::string Description() const = 0;
  virtual StatusOr<std::unique_ptr<ModelBackend>> BuildModel(const ModelConfig& config,
                                                             const std::vector<Param*>& params,
                                                             uint64_t seed) const = 0;
  // Device memory of DeviceBuffer; the copies wait for all queued work.
  virtual StatusOr<float*> Allocate(int64_t n) const = 0;
  virtual void Free(float* data) const = 0;
  virtual Status CopyToDevice(float* device, const float* host, int64_t n) const = 0;
  virtual Status CopyToHost(float* host, const float* device, int64_t n) const = 0;
  virtual StatusOr<std::string> NcclUniqueIdBytes() const = 0;
  virtual StatusOr<std::unique_ptr<CollectiveBackend>> CreateCollective(
      int rank, int world, const std::string& unique_id, GpuStream stream) const = 0;
};

// Names this interface and the layout of what crosses it: both sides
// compute it, and the module refuses a front whose key differs. Raise
// kBackendVersion whenever this header changes; the sizes catch most
// changes to the types passed by reference.
constexpr int kBackendVersion = 2;
std::string BuildKey();

}  // namespace pstrain::gpu

// The module's one exported symbol (dlsym looks it up by this name): its
// Backend when `front_key` is the module's BuildKey(), else nullptr. Either
// way *module_key is set to the module's key, for the error message.
extern "C" {
using PstrainGpuBackendFn = const pstrain::gpu::Backend* (*)(const char* front_key,
                                                             const char** module_key);
}
#define PSTRAIN_GPU_ENTRY_POINT "pstrain_gpu_backend"
