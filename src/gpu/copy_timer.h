// Internal to the CUDA module: the device time and bytes of a model's host
// <-> device copies, for GpuModel::CopySeconds and CopiedBytes. An event
// before and after each copy on the stream, read once the stream was waited
// for (reading earlier would wait). Begin() drops the marks of a call that
// ended in an error.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "src/gpu/cuda_util.h"

namespace pstrain::gpu {

class CopyTimer {
 public:
  CopyTimer() = default;
  CopyTimer(const CopyTimer&) = delete;
  CopyTimer& operator=(const CopyTimer&) = delete;
  ~CopyTimer() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  void Begin() { used_ = 0; }
  // Queues a copy of `bytes` between `from` and `to` on `stream`, timed.
  Status Copy(void* to, const void* from, int64_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    if (bytes <= 0) return Status::OK();
    PSTRAIN_RETURN_IF_ERROR(Mark(stream));
    PSTRAIN_CUDA(cudaMemcpyAsync(to, from, static_cast<size_t>(bytes), kind, stream));
    bytes_ += bytes;
    return Mark(stream);
  }
  // After the stream was waited for: adds up the time between the pairs.
  Status Collect() {
    for (size_t i = 0; i + 1 < used_; i += 2) {
      float ms = 0;
      PSTRAIN_CUDA(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
      seconds_ += 1e-3 * ms;
    }
    used_ = 0;
    return Status::OK();
  }
  double seconds() const { return seconds_; }
  int64_t bytes() const { return bytes_; }

 private:
  Status Mark(cudaStream_t stream) {
    if (used_ == events_.size()) {
      cudaEvent_t e = nullptr;
      PSTRAIN_CUDA(cudaEventCreate(&e));
      events_.push_back(e);
    }
    PSTRAIN_CUDA(cudaEventRecord(events_[used_++], stream));
    return Status::OK();
  }

  std::vector<cudaEvent_t> events_;  // owned
  size_t used_ = 0;                  // events_[0, used_) are recorded this call
  double seconds_ = 0;
  int64_t bytes_ = 0;  // queued so far, both directions
};

}  // namespace pstrain::gpu
