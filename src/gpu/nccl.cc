// The collectives of NcclCommunicator over NCCL: one rank per process (or
// thread), device 0.
#include <nccl.h>

#include <cstring>
#include <string>

#include "src/gpu/cuda_backend.h"
#include "src/gpu/cuda_util.h"

namespace pstrain::gpu {
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

#define PSTRAIN_NCCL(call, comm) PSTRAIN_RETURN_IF_ERROR(NcclStatus((call), #call, (comm)))

class NcclCollective final : public CollectiveBackend {
 public:
  NcclCollective(cudaStream_t stream, int world) : stream_(stream), world_(world) {}
  ~NcclCollective() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }
  Status Init(const ncclUniqueId& id, int rank) {
    PSTRAIN_NCCL(ncclCommInitRank(&comm_, world_, id, rank), nullptr);
    return Status::OK();
  }

  Status AllReduce(float* device_data, int64_t n, bool average) override {
    PSTRAIN_NCCL(ncclAllReduce(device_data, device_data, static_cast<size_t>(n), ncclFloat,
                               average ? ncclAvg : ncclSum, comm_, stream_),
                 comm_);
    return Status::OK();
  }

  Status Broadcast(float* device_data, int64_t n, int root) override {
    if (root < 0 || root >= world_) {
      return InvalidArgument("NCCL broadcast from rank " + std::to_string(root) + " of world " +
                             std::to_string(world_));
    }
    PSTRAIN_NCCL(ncclBroadcast(device_data, device_data, static_cast<size_t>(n), ncclFloat, root,
                               comm_, stream_),
                 comm_);
    return Status::OK();
  }

  Status Synchronize() override {
    PSTRAIN_CUDA(cudaStreamSynchronize(stream_));
    return Status::OK();
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_;  // not owned
  int world_;
};

}  // namespace

StatusOr<std::string> CudaBackend::NcclUniqueIdBytes() const {
  ncclUniqueId id;
  PSTRAIN_NCCL(ncclGetUniqueId(&id), nullptr);
  return std::string(id.internal, sizeof(id.internal));
}

StatusOr<std::unique_ptr<CollectiveBackend>> CudaBackend::CreateCollective(
    int rank, int world, const std::string& unique_id, GpuStream stream) const {
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
  PSTRAIN_RETURN_IF_ERROR(CheckVisible());
  PSTRAIN_CUDA(cudaSetDevice(0));
  auto collective = std::make_unique<NcclCollective>(stream, world);
  PSTRAIN_RETURN_IF_ERROR(collective->Init(id, rank));
  return std::unique_ptr<CollectiveBackend>(std::move(collective));
}

}  // namespace pstrain::gpu
