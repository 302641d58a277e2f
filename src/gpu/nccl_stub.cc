// NcclCommunicator where NCCL (or CUDA) was not found at build time: every
// call says so.
#include "src/gpu/gpu.h"

namespace pstrain {
namespace {

Status NoNccl() {
  return FailedPrecondition(GpuBuildEnabled()
                                ? "this pstrain was built without NCCL (nccl.h not found at build "
                                  "time), so GPU workers cannot all-reduce"
                                : "this pstrain was built without CUDA (nvcc not found at build "
                                  "time), so it has no NCCL");
}

}  // namespace

struct NcclCommunicator::Impl {};

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclCommunicator::~NcclCommunicator() = default;

StatusOr<std::string> NcclUniqueIdBytes() { return NoNccl(); }

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(int, int, const std::string&,
                                                                     GpuStream) {
  return NoNccl();
}

Status NcclCommunicator::AllReduce(float*, int64_t, bool) { return NoNccl(); }
Status NcclCommunicator::Broadcast(float*, int64_t, int) { return NoNccl(); }
Status NcclCommunicator::Synchronize() { return NoNccl(); }

}  // namespace pstrain
