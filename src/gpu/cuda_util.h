// Internal to src/gpu (CUDA builds only): CUDA and cuBLAS return codes as
// Status, and owning arrays in device and pinned host memory. Like the model
// that owns them, these belong to one thread.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

#include "src/common/status.h"

namespace pstrain::gpu {

// "cudaMalloc(...): out of memory" as Internal; OK for cudaSuccess.
Status CudaStatus(cudaError_t error, const char* call);
Status CublasStatus(cublasStatus_t status, const char* call);

}  // namespace pstrain::gpu

// Evaluates a CUDA / cuBLAS call and returns its error, naming the call.
#define PSTRAIN_CUDA(call) PSTRAIN_RETURN_IF_ERROR(::pstrain::gpu::CudaStatus((call), #call))
#define PSTRAIN_CUBLAS(call) PSTRAIN_RETURN_IF_ERROR(::pstrain::gpu::CublasStatus((call), #call))

namespace pstrain::gpu {

// T's in device memory, grown on demand (contents are not kept when it
// grows: callers overwrite).
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}
  DeviceArray& operator=(DeviceArray&&) = delete;
  ~DeviceArray() { cudaFree(data_); }

  // Makes room for n values.
  Status Reserve(int64_t n) {
    if (n <= capacity_) return Status::OK();
    cudaFree(data_);  // waits for the device: queued work may still read it
    data_ = nullptr;
    capacity_ = 0;
    PSTRAIN_CUDA(cudaMalloc(reinterpret_cast<void**>(&data_), sizeof(T) * n));
    capacity_ = n;
    return Status::OK();
  }
  T* get() const { return data_; }

 private:
  T* data_ = nullptr;
  int64_t capacity_ = 0;
};

// Page-locked host T's, so that copies to and from the device run
// asynchronously at full bus speed; grown on demand like DeviceArray.
template <typename T>
class PinnedArray {
 public:
  PinnedArray() = default;
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  ~PinnedArray() { cudaFreeHost(data_); }

  Status Reserve(int64_t n) {
    if (n <= capacity_) return Status::OK();
    cudaFreeHost(data_);  // waits for the device: queued copies may still read it
    data_ = nullptr;
    capacity_ = 0;
    PSTRAIN_CUDA(cudaMallocHost(reinterpret_cast<void**>(&data_), sizeof(T) * n));
    capacity_ = n;
    return Status::OK();
  }
  T* get() const { return data_; }

 private:
  T* data_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace pstrain::gpu
