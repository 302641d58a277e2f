// flatten and concat: layers that only move values. Both take any per-sample
// input shape and produce [N, F].
#include <cassert>
#include <cstring>

#include "src/nn/layers.h"

namespace pstrain {
namespace {

void Copy(const float* src, int64_t count, float* dst) {
  if (count > 0) std::memcpy(dst, src, sizeof(float) * count);
}

class Flatten : public Layer {
 public:
  explicit Flatten(const LayerConfig& c) : Layer(c.name) {}

  StatusOr<Shape> Build(const Shape& input, uint64_t) override {
    features_ = NumElements(input);
    return Shape{features_};
  }

  void Forward(const Batch&, const Tensor& in, Tensor* out, bool) override {
    out->Resize({in.dim(0), features_});
    Copy(in.ptr(), in.size(), out->ptr());
  }

  void Backward(const Batch&, const Tensor& in, const Tensor&, const Tensor& dout,
                Tensor* din) override {
    if (din == nullptr) return;
    din->Resize(in.shape);
    Copy(dout.ptr(), dout.size(), din->ptr());
  }

 private:
  int64_t features_ = 0;
};

// [N, F] + the batch's dense features [N, D] -> [N, F + D].
class Concat : public Layer {
 public:
  Concat(const LayerConfig& c, const Shape& dense) : Layer(c.name), dense_(dense) {}

  StatusOr<Shape> Build(const Shape& input, uint64_t) override {
    if (dense_.empty()) {
      return InvalidArgument("concat appends the model's dense input, and the model has none");
    }
    in_ = NumElements(input);
    dense_size_ = NumElements(dense_);
    return Shape{in_ + dense_size_};
  }

  void Forward(const Batch& batch, const Tensor& in, Tensor* out, bool) override {
    const int64_t n = in.dim(0), width = in_ + dense_size_;
    assert(in.size() == n * in_ && batch.dense.size() == n * dense_size_);
    out->Resize({n, width});
    for (int64_t s = 0; s < n; ++s) {
      Copy(in.ptr() + s * in_, in_, out->ptr() + s * width);
      Copy(batch.dense.ptr() + s * dense_size_, dense_size_, out->ptr() + s * width + in_);
    }
  }

  void Backward(const Batch&, const Tensor& in, const Tensor&, const Tensor& dout,
                Tensor* din) override {
    if (din == nullptr) return;
    din->Resize(in.shape);
    const int64_t n = in.dim(0), width = in_ + dense_size_;
    for (int64_t s = 0; s < n; ++s) Copy(dout.ptr() + s * width, in_, din->ptr() + s * in_);
  }

 private:
  const Shape dense_;
  int64_t in_ = 0, dense_size_ = 0;
};

}  // namespace

std::unique_ptr<Layer> NewFlatten(const LayerConfig& config) {
  return std::make_unique<Flatten>(config);
}

std::unique_ptr<Layer> NewConcat(const LayerConfig& config, const Shape& dense) {
  return std::make_unique<Concat>(config, dense);
}

}  // namespace pstrain
