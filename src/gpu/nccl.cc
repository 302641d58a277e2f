// NcclCommunicator over NCCL: one rank per process (or thread), device 0.
#include <nccl.h>

#include <cstring>
#include <string>

#include "src/gpu/cuda_util.h"
#include "src/gpu/gpu.h"

namespace pstrain {
namespace {

// A rank that went away or a network failure is Unavailable (the job can
// name the peer); anything else is a bug or a broken installation.
Status NcclStatus(ncclResult_t result, const char* call, ncclComm_t comm = nullptr) {
  if (result == ncclSuccess) return Status::OK();
  std::string message = std::string(call) + ": " + ncclGetErrorString(result);
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && detail[0] != '\0') message += std::string(" (") + detail + ")";
  if (result == ncclRemoteError || result == ncclSystemError) return Unavailable(message);
  return Internal(message);
}

}  // namespace

#define PSTRAIN_NCCL(call, comm) PSTRAIN_RETURN_IF_ERROR(NcclStatus((call), #call, (comm)))

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;  // not owned
  int world = 0;

  ~Impl() {
    if (comm != nullptr) ncclCommDestroy(comm);
  }
};

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclCommunicator::~NcclCommunicator() = default;

StatusOr<std::string> NcclUniqueIdBytes() {
  ncclUniqueId id;
  PSTRAIN_NCCL(ncclGetUniqueId(&id), nullptr);
  return std::string(id.internal, sizeof(id.internal));
}

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(int rank, int world,
                                                                     const std::string& unique_id,
                                                                     GpuStream stream) {
  if (world < 1 || rank < 0 || rank >= world) {
    return InvalidArgument("NCCL rank " + std::to_string(rank) + " of world " +
                           std::to_string(world));
  }
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal)) {
    return InvalidArgument("NCCL unique id of " + std::to_string(unique_id.size()) +
                           " bytes, expected " + std::to_string(sizeof(id.internal)));
  }
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  PSTRAIN_RETURN_IF_ERROR(CheckGpuVisible());
  PSTRAIN_CUDA(cudaSetDevice(0));
  auto impl = std::make_unique<Impl>();
  impl->stream = stream;
  impl->world = world;
  PSTRAIN_NCCL(ncclCommInitRank(&impl->comm, world, id, rank), nullptr);
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(impl)));
}

Status NcclCommunicator::AllReduce(float* device_data, int64_t n, bool average) {
  PSTRAIN_NCCL(ncclAllReduce(device_data, device_data, static_cast<size_t>(n), ncclFloat,
                             average ? ncclAvg : ncclSum, impl_->comm, impl_->stream),
               impl_->comm);
  return Status::OK();
}

Status NcclCommunicator::Broadcast(float* device_data, int64_t n, int root) {
  if (root < 0 || root >= impl_->world) {
    return InvalidArgument("NCCL broadcast from rank " + std::to_string(root) + " of world " +
                           std::to_string(impl_->world));
  }
  PSTRAIN_NCCL(ncclBroadcast(device_data, device_data, static_cast<size_t>(n), ncclFloat, root,
                             impl_->comm, impl_->stream),
               impl_->comm);
  return Status::OK();
}

Status NcclCommunicator::Synchronize() {
  PSTRAIN_CUDA(cudaStreamSynchronize(impl_->stream));
  return Status::OK();
}

}  // namespace pstrain
