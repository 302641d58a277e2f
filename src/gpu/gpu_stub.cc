// The GPU API where CUDA was not found at build time (or was turned off with
// PSTRAIN_ENABLE_CUDA=OFF): every call that needs a device says why it
// cannot have one, so `device: gpu` fails at start-up with that message.
#include "src/common/config/model_config.h"
#include "src/gpu/gpu.h"

namespace pstrain {
namespace {

Status NoCuda() {
  return FailedPrecondition(
      "model.device: gpu, but this pstrain was built without CUDA (nvcc not found at build time, "
      "or PSTRAIN_ENABLE_CUDA=OFF)");
}

}  // namespace

bool GpuBuildEnabled() { return false; }
Status CheckGpuVisible() { return NoCuda(); }
std::string GpuDescription() { return "no GPU (built without CUDA)"; }

struct GpuModel::Impl {};

GpuModel::GpuModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuModel::~GpuModel() = default;

StatusOr<std::unique_ptr<GpuModel>> GpuModel::Build(const ModelConfig& config,
                                                    const std::vector<Param*>&, uint64_t) {
  PSTRAIN_RETURN_IF_ERROR(CheckGpuModelSupported(config));
  return NoCuda();
}

// A GpuModel cannot be built here, so these are never reached on one.
Status GpuModel::UploadWeights() { return NoCuda(); }
StatusOr<const Tensor*> GpuModel::Forward(const Batch&, bool) { return NoCuda(); }
StatusOr<float> GpuModel::Backward(const Batch&) { return NoCuda(); }
GpuStream GpuModel::stream() const { return nullptr; }
double GpuModel::CopySeconds() const { return 0; }
void GpuModel::SetTrainingForwards(uint64_t) {}

StatusOr<std::unique_ptr<DeviceBuffer>> DeviceBuffer::Create(int64_t) { return NoCuda(); }
DeviceBuffer::~DeviceBuffer() = default;
Status DeviceBuffer::CopyFromHost(const std::vector<float>&) { return NoCuda(); }
StatusOr<std::vector<float>> DeviceBuffer::CopyToHost() const { return NoCuda(); }

}  // namespace pstrain
