// layer_norm: each sample's features (all of them: [C, H, W] for an image,
// [F] for a vector, as PyTorch's LayerNorm over the sample's shape)
// normalized to mean 0 and variance 1, then scaled and shifted per feature:
//   y = (x - mean) / sqrt(var + eps) * weight + bias
// var the biased variance; weight starts at 1, bias at 0. The statistics
// are the sample's own, so training and evaluation compute the same thing
// and nothing is kept between batches.
#include <cmath>

#include "src/nn/layers.h"

namespace pstrain {
namespace {

class LayerNorm : public Layer {
 public:
  explicit LayerNorm(const LayerConfig& c) : Layer(c.name), eps_(c.eps) {}

  StatusOr<Shape> Build(const Shape& input, uint64_t) override {
    features_ = NumElements(input);
    if (input.empty() || features_ <= 0)
      return InvalidArgument("layer_norm expects a non-empty input, got " + ShapeString(input));
    weight_ = NewParam(name(), "weight", input);
    std::fill(weight_.value.data.begin(), weight_.value.data.end(), 1.0f);
    bias_ = NewParam(name(), "bias", input);
    return input;
  }

  void Forward(const Batch&, const Tensor& in, Tensor* out, bool) override {
    out->Resize(in.shape);
    const float* w = weight_.value.ptr();
    const float* b = bias_.value.ptr();
    for (int64_t s = 0; s < in.dim(0); ++s) {
      const float* x = in.ptr() + s * features_;
      float* y = out->ptr() + s * features_;
      const Moments m = MomentsOf(x);
      for (int64_t i = 0; i < features_; ++i)
        y[i] = static_cast<float>((x[i] - m.mean) * m.inv_std) * w[i] + b[i];
    }
  }

  // With xh the normalized input and g = dy * weight:
  //   dx = inv_std * (g - mean(g) - xh * mean(g * xh)),
  //   dweight = sum over samples of dy * xh, dbias = sum of dy.
  void Backward(const Batch&, const Tensor& in, const Tensor&, const Tensor& dout,
                Tensor* din) override {
    std::fill(weight_.grad.data.begin(), weight_.grad.data.end(), 0.0f);
    std::fill(bias_.grad.data.begin(), bias_.grad.data.end(), 0.0f);
    if (din != nullptr) din->Resize(in.shape);
    const float* w = weight_.value.ptr();
    for (int64_t s = 0; s < in.dim(0); ++s) {
      const float* x = in.ptr() + s * features_;
      const float* dy = dout.ptr() + s * features_;
      const Moments m = MomentsOf(x);
      double sum_g = 0, sum_g_xh = 0;
      for (int64_t i = 0; i < features_; ++i) {
        const double xh = (x[i] - m.mean) * m.inv_std;
        weight_.grad.data[i] += static_cast<float>(dy[i] * xh);
        bias_.grad.data[i] += dy[i];
        const double g = static_cast<double>(dy[i]) * w[i];
        sum_g += g;
        sum_g_xh += g * xh;
      }
      if (din == nullptr) continue;
      const double mean_g = sum_g / features_, mean_g_xh = sum_g_xh / features_;
      float* dx = din->ptr() + s * features_;
      for (int64_t i = 0; i < features_; ++i) {
        const double xh = (x[i] - m.mean) * m.inv_std;
        const double g = static_cast<double>(dy[i]) * w[i];
        dx[i] = static_cast<float>(m.inv_std * (g - mean_g - xh * mean_g_xh));
      }
    }
  }

  std::vector<Param*> Params() override { return {&weight_, &bias_}; }

 private:
  struct Moments {
    double mean = 0, inv_std = 0;
  };
  // In double: a sample of many features (a feature map) sums without
  // losing the small ones.
  Moments MomentsOf(const float* x) const {
    double sum = 0, sum_sq = 0;
    for (int64_t i = 0; i < features_; ++i) sum += x[i];
    const double mean = sum / features_;
    for (int64_t i = 0; i < features_; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
    return {mean, 1.0 / std::sqrt(sum_sq / features_ + eps_)};
  }

  const float eps_;
  int64_t features_ = 0;
  Param weight_;
  Param bias_;
};

}  // namespace

std::unique_ptr<Layer> NewLayerNorm(const LayerConfig& config) {
  return std::make_unique<LayerNorm>(config);
}

}  // namespace pstrain
