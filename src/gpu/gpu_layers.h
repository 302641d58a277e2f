// Internal to src/gpu (CUDA builds only): the layers of a GpuModel. Each
// mirrors a CPU layer of src/nn (same shapes, layouts and semantics) and
// runs on the model's stream.
#pragma once

#include <memory>
#include <vector>

#include "src/common/config/model_config.h"
#include "src/common/tensor.h"
#include "src/gpu/cuda_util.h"

namespace pstrain::gpu {

// A tensor in device memory.
struct DeviceTensor {
  Shape shape;
  DeviceArray<float> data;

  Status Resize(Shape s) {
    shape = std::move(s);
    return data.Reserve(NumElements(shape));
  }
  int64_t size() const { return NumElements(shape); }
  float* ptr() const { return data.get(); }
};

// The batch of the last Forward on the device, for the layers that read
// more than their input tensor: concat (the dense features) and
// embedding_bag (the ids and, after a training Forward, where each id
// occurs, for its gradient). Set by the model before the layers run.
struct DeviceBatch {
  int64_t samples = 0;
  const DeviceTensor* dense = nullptr;  // [samples, input...]
  const int32_t* ids = nullptr;         // [samples, fields]
  int64_t fields = 0;
  int64_t range = 0;                     // every id is < range
  const int32_t* id_start = nullptr;     // [range + 1]: id r's occurrences begin here
  const int32_t* occurrences = nullptr;  // s * fields + f, grouped by id, in batch order
};

// What the layers of one model share: its stream and cuBLAS handle, the
// batch on the device, and a vector of ones (bias gradients are GEMVs with
// it).
class GpuContext {
 public:
  GpuContext(cudaStream_t stream, cublasHandle_t blas) : stream_(stream), blas_(blas) {}
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t blas() const { return blas_; }
  // At least n ones.
  StatusOr<const float*> Ones(int64_t n);
  const DeviceBatch& batch() const { return batch_; }
  void set_batch(const DeviceBatch& batch) { batch_ = batch; }

 private:
  cudaStream_t stream_;  // not owned: the model's
  cublasHandle_t blas_;  // not owned: the model's
  DeviceArray<float> ones_;
  int64_t ones_size_ = 0;  // how many of ones_ are filled
  DeviceBatch batch_;
};

// A parameter's device memory (slices of the model's flat arrays).
struct DeviceParam {
  float* value = nullptr;
  float* grad = nullptr;
};

class GpuLayer {
 public:
  virtual ~GpuLayer() = default;
  virtual Status Forward(const DeviceTensor& in, DeviceTensor* out, bool training) = 0;
  // Sets the parameters' grads and, when din is not null, din. `in` and
  // `out` are those of the last Forward.
  virtual Status Backward(const DeviceTensor& in, const DeviceTensor& out, const DeviceTensor& dout,
                          DeviceTensor* din) = 0;
  // As Layer::SetTrainingForwards (dropout's masks).
  virtual void SetTrainingForwards(uint64_t /*done*/) {}
};

// The GPU twin of a CPU layer built from `config` (its name filled in) for
// one sample of shape `input`, whose output shape is `output`. `params`:
// weight then bias, as the CPU layer's Params(). `seed` keys dropout masks
// as the CPU's. `context` must outlive the layer.
std::unique_ptr<GpuLayer> MakeGpuLayer(const LayerConfig& config, const Shape& input,
                                       const Shape& output, const std::vector<DeviceParam>& params,
                                       uint64_t seed, GpuContext* context);

}  // namespace pstrain::gpu
