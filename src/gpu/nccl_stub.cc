// The collectives of a CUDA module built without NCCL (nccl.h not found at
// build time): every call says so.
#include <string>

#include "src/gpu/cuda_backend.h"

namespace pstrain::gpu {
namespace {

Status NoNccl() {
  return FailedPrecondition(
      "this pstrain was built without NCCL (nccl.h not found at build time), so GPU workers "
      "cannot all-reduce");
}

}  // namespace

StatusOr<std::string> CudaBackend::NcclUniqueIdBytes() const { return NoNccl(); }

StatusOr<std::unique_ptr<CollectiveBackend>> CudaBackend::CreateCollective(int, int,
                                                                           const std::string&,
                                                                           GpuStream) const {
  return NoNccl();
}

}  // namespace pstrain::gpu
