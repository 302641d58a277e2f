// The API of gpu.h in every binary: each call that needs a device opens the
// CUDA module (module_loader.h) and forwards to it; a module that cannot be
// had answers with the reason, as CheckGpuVisible() words it.
#include <string>
#include <utility>
#include <vector>

#include "src/gpu/backend.h"
#include "src/gpu/gpu.h"
#include "src/gpu/module_loader.h"

namespace pstrain {

using gpu::Backend;
using gpu::LoadedBackend;

bool GpuBuildEnabled() {
#ifdef PSTRAIN_GPU_MODULE_FILE
  return true;
#else
  return false;
#endif
}

Status CheckGpuVisible() {
  auto backend = LoadedBackend();
  if (!backend.ok()) return backend.status();
  return (*backend)->CheckVisible();
}

std::string GpuDescription() {
  auto backend = LoadedBackend();
  if (!backend.ok()) return "no GPU (" + backend.status().message() + ")";
  return (*backend)->Description();
}

GpuModel::GpuModel(std::unique_ptr<gpu::ModelBackend> backend) : backend_(std::move(backend)) {}
GpuModel::~GpuModel() = default;

StatusOr<std::unique_ptr<GpuModel>> GpuModel::Build(const ModelConfig& config,
                                                    const std::vector<Param*>& params,
                                                    uint64_t seed) {
  // Before the module: a model the GPU path cannot run is refused the same
  // way with a device or without.
  PSTRAIN_RETURN_IF_ERROR(CheckGpuModelSupported(config));
  auto backend = LoadedBackend();
  if (!backend.ok()) return backend.status();
  auto built = (*backend)->BuildModel(config, params, seed);
  if (!built.ok()) return built.status();
  return std::unique_ptr<GpuModel>(new GpuModel(std::move(*built)));
}

Status GpuModel::UploadWeights() { return backend_->UploadWeights(); }
StatusOr<GpuModel::PinnedTable> GpuModel::PinTable(size_t index) {
  return backend_->PinTable(index);
}
StatusOr<const Tensor*> GpuModel::Forward(const Batch& batch, bool training) {
  return backend_->Forward(batch, training);
}
StatusOr<float> GpuModel::Backward(const Batch& batch) {
  return backend_->Backward(batch, on_device_grads, reduced_on_device);
}
GpuStream GpuModel::stream() const { return backend_->stream(); }
double GpuModel::CopySeconds() const { return backend_->CopySeconds(); }
int64_t GpuModel::CopiedBytes() const { return backend_->CopiedBytes(); }
void GpuModel::SetTrainingForwards(uint64_t done) { backend_->SetTrainingForwards(done); }

StatusOr<std::unique_ptr<DeviceBuffer>> DeviceBuffer::Create(int64_t n) {
  if (n < 0) return InvalidArgument("DeviceBuffer of " + std::to_string(n) + " floats");
  auto backend = LoadedBackend();
  if (!backend.ok()) return backend.status();
  auto data = (*backend)->Allocate(n);
  if (!data.ok()) return data.status();
  return std::unique_ptr<DeviceBuffer>(new DeviceBuffer(*data, n));
}

// A DeviceBuffer exists only once the module was loaded.
DeviceBuffer::~DeviceBuffer() { (*LoadedBackend())->Free(data_); }

Status DeviceBuffer::CopyFromHost(const std::vector<float>& src) {
  if (static_cast<int64_t>(src.size()) != size_) {
    return InvalidArgument("DeviceBuffer of " + std::to_string(size_) + " floats given " +
                           std::to_string(src.size()));
  }
  return (*LoadedBackend())->CopyToDevice(data_, src.data(), size_);
}

StatusOr<std::vector<float>> DeviceBuffer::CopyToHost() const {
  std::vector<float> out(static_cast<size_t>(size_));
  PSTRAIN_RETURN_IF_ERROR((*LoadedBackend())->CopyToHost(out.data(), data_, size_));
  return out;
}

StatusOr<std::string> NcclUniqueIdBytes() {
  auto backend = LoadedBackend();
  if (!backend.ok()) return backend.status();
  return (*backend)->NcclUniqueIdBytes();
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<gpu::CollectiveBackend> backend)
    : backend_(std::move(backend)) {}
NcclCommunicator::~NcclCommunicator() = default;

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(int rank, int world,
                                                                     const std::string& unique_id,
                                                                     GpuStream stream) {
  auto backend = LoadedBackend();
  if (!backend.ok()) return backend.status();
  auto made = (*backend)->CreateCollective(rank, world, unique_id, stream);
  if (!made.ok()) return made.status();
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(*made)));
}

Status NcclCommunicator::AllReduce(float* device_data, int64_t n, bool average) {
  return backend_->AllReduce(device_data, n, average);
}
Status NcclCommunicator::Broadcast(float* device_data, int64_t n, int root) {
  return backend_->Broadcast(device_data, n, root);
}
Status NcclCommunicator::Synchronize() { return backend_->Synchronize(); }

}  // namespace pstrain
