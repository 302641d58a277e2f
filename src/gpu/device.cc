// What the CUDA module knows of the device: whether one is visible, its
// description, DeviceBuffer's memory, and the CUDA and cuBLAS errors as
// Status (cuda_util.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "src/gpu/cuda_backend.h"
#include "src/gpu/cuda_util.h"

namespace pstrain::gpu {

Status CudaStatus(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return Status::OK();
  return Internal(std::string(call) + ": " + cudaGetErrorString(error));
}

Status CublasStatus(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::OK();
  return Internal(std::string(call) + ": " + cublasGetStatusString(status));
}

Status CudaBackend::CheckVisible() const {
  // Read here only to explain a missing device: CUDA itself applies it.
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string env = visible == nullptr
                              ? std::string("CUDA_VISIBLE_DEVICES is unset")
                              : "CUDA_VISIBLE_DEVICES=\"" + std::string(visible) + "\"";
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0) {
    // Without a driver CUDA's own words ("driver version is insufficient")
    // suggest an upgrade where there is nothing to upgrade.
    return FailedPrecondition(
        "model.device: gpu, but no GPU is visible (no NVIDIA driver is installed; " + env + ")");
  }
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return FailedPrecondition("model.device: gpu, but no GPU is visible (CUDA: " +
                              std::string(cudaGetErrorString(error)) + "; " + env + ")");
  }
  if (count == 0) {
    return FailedPrecondition("model.device: gpu, but no GPU is visible (CUDA reports 0 devices; " +
                              env + ")");
  }
  // A device can be listed and still refuse a context (exclusive mode, a
  // driver fault): make one now rather than at the first layer.
  Status usable = CudaStatus(cudaSetDevice(0), "cudaSetDevice(0)");
  if (usable.ok()) usable = CudaStatus(cudaFree(nullptr), "cudaFree(nullptr)");
  if (!usable.ok()) {
    return FailedPrecondition("model.device: gpu, but GPU 0 is not usable: " + usable.message());
  }
  return Status::OK();
}

std::string CudaBackend::Description() const {
  cudaDeviceProp prop{};
  const cudaError_t error = cudaGetDeviceProperties(&prop, 0);
  if (error != cudaSuccess) return std::string("no GPU (") + cudaGetErrorString(error) + ")";
  char memory[32];
  std::snprintf(memory, sizeof(memory), "%.1f GiB",
                static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  return std::string(prop.name) + ", " + memory + ", compute capability " +
         std::to_string(prop.major) + "." + std::to_string(prop.minor);
}

StatusOr<float*> CudaBackend::Allocate(int64_t n) const {
  float* data = nullptr;
  PSTRAIN_CUDA(
      cudaMalloc(reinterpret_cast<void**>(&data), sizeof(float) * std::max<int64_t>(n, 1)));
  return data;
}

void CudaBackend::Free(float* data) const { cudaFree(data); }

Status CudaBackend::CopyToDevice(float* device, const float* host, int64_t n) const {
  PSTRAIN_CUDA(cudaDeviceSynchronize());
  PSTRAIN_CUDA(cudaMemcpy(device, host, sizeof(float) * n, cudaMemcpyHostToDevice));
  return Status::OK();
}

Status CudaBackend::CopyToHost(float* host, const float* device, int64_t n) const {
  PSTRAIN_CUDA(cudaDeviceSynchronize());
  PSTRAIN_CUDA(cudaMemcpy(host, device, sizeof(float) * n, cudaMemcpyDeviceToHost));
  return Status::OK();
}

}  // namespace pstrain::gpu
