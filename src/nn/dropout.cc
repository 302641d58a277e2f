// dropout: inverted (kept values scaled by 1 / (1 - rate) in training, so
// evaluation is the identity). The mask of the k-th training Forward is a
// pure function of (build seed, layer name, k, element index), so a run is
// reproducible and needs no RNG state beyond the counter.
#include <cassert>
#include <cstring>
#include <vector>

#include "src/common/random.h"
#include "src/nn/eigen_maps.h"
#include "src/nn/layers.h"

namespace pstrain {
namespace {

class Dropout : public Layer {
 public:
  explicit Dropout(const LayerConfig& c) : Layer(c.name), rate_(c.rate) {}

  StatusOr<Shape> Build(const Shape& input, uint64_t seed) override {
    key_ = StreamKey(seed, name());
    return input;
  }

  void Forward(const Batch&, const Tensor& in, Tensor* out, bool training) override {
    out->Resize(in.shape);
    masked_ = training && rate_ > 0.0f;
    if (!masked_) {
      std::memcpy(out->ptr(), in.ptr(), sizeof(float) * in.data.size());
      return;
    }
    const uint64_t stream = Mix64(key_ ^ Mix64(counter_++));
    const float scale = 1.0f / (1.0f - rate_);
    mask_.resize(in.data.size());
    for (size_t i = 0; i < mask_.size(); ++i) {
      mask_[i] = UnitFloat(Mix64(stream + i)) < rate_ ? 0.0f : scale;
    }
    ArrayMap(out->ptr(), out->size()) = ConstArrayMap(in.ptr(), in.size()) * Mask();
  }

  void SetTrainingForwards(uint64_t done) override { counter_ = done; }

  void Backward(const Batch&, const Tensor&, const Tensor&, const Tensor& dout,
                Tensor* din) override {
    if (din == nullptr) return;
    din->Resize(dout.shape);
    ConstArrayMap dy(dout.ptr(), dout.size());
    if (masked_) {
      ArrayMap(din->ptr(), din->size()) = dy * Mask();
    } else {
      ArrayMap(din->ptr(), din->size()) = dy;
    }
  }

 private:
  ConstArrayMap Mask() const {
    return ConstArrayMap(mask_.data(), static_cast<Eigen::Index>(mask_.size()));
  }

  const float rate_;
  uint64_t key_ = 0;
  uint64_t counter_ = 0;  // training Forwards so far
  bool masked_ = false;   // whether the last Forward applied mask_
  FloatBuffer mask_;      // 0 or 1 / (1 - rate), per element
};

}  // namespace

std::unique_ptr<Layer> NewDropout(const LayerConfig& config) {
  return std::make_unique<Dropout>(config);
}

}  // namespace pstrain
