// What the CUDA build knows of the device: whether one is visible, its
// description, and the CUDA and cuBLAS errors as Status (cuda_util.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "src/gpu/cuda_util.h"
#include "src/gpu/gpu.h"

namespace pstrain {
namespace gpu {

Status CudaStatus(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return Status::OK();
  return Internal(std::string(call) + ": " + cudaGetErrorString(error));
}

Status CublasStatus(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::OK();
  return Internal(std::string(call) + ": " + cublasGetStatusString(status));
}

}  // namespace gpu

bool GpuBuildEnabled() { return true; }

Status CheckGpuVisible() {
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
  Status usable = gpu::CudaStatus(cudaSetDevice(0), "cudaSetDevice(0)");
  if (usable.ok()) usable = gpu::CudaStatus(cudaFree(nullptr), "cudaFree(nullptr)");
  if (!usable.ok()) {
    return FailedPrecondition("model.device: gpu, but GPU 0 is not usable: " + usable.message());
  }
  return Status::OK();
}

std::string GpuDescription() {
  cudaDeviceProp prop{};
  const cudaError_t error = cudaGetDeviceProperties(&prop, 0);
  if (error != cudaSuccess) return std::string("no GPU (") + cudaGetErrorString(error) + ")";
  char memory[32];
  std::snprintf(memory, sizeof(memory), "%.1f GiB",
                static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  return std::string(prop.name) + ", " + memory + ", compute capability " +
         std::to_string(prop.major) + "." + std::to_string(prop.minor);
}

StatusOr<std::unique_ptr<DeviceBuffer>> DeviceBuffer::Create(int64_t n) {
  float* data = nullptr;
  PSTRAIN_CUDA(
      cudaMalloc(reinterpret_cast<void**>(&data), sizeof(float) * std::max<int64_t>(n, 1)));
  return std::unique_ptr<DeviceBuffer>(new DeviceBuffer(data, n));
}

DeviceBuffer::~DeviceBuffer() { cudaFree(data_); }

Status DeviceBuffer::CopyFromHost(const std::vector<float>& src) {
  if (static_cast<int64_t>(src.size()) != size_) {
    return InvalidArgument("DeviceBuffer of " + std::to_string(size_) + " floats given " +
                           std::to_string(src.size()));
  }
  PSTRAIN_CUDA(cudaDeviceSynchronize());
  PSTRAIN_CUDA(cudaMemcpy(data_, src.data(), sizeof(float) * size_, cudaMemcpyHostToDevice));
  return Status::OK();
}

StatusOr<std::vector<float>> DeviceBuffer::CopyToHost() const {
  std::vector<float> out(static_cast<size_t>(size_));
  PSTRAIN_CUDA(cudaDeviceSynchronize());
  PSTRAIN_CUDA(cudaMemcpy(out.data(), data_, sizeof(float) * size_, cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace pstrain
