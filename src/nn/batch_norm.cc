// batch_norm: each channel (the first dimension of a sample: [C] features,
// or [C, H, W] images, over N x H x W values) normalized with the batch's
// mean and variance in training and with running ones in evaluation, then
// scaled and shifted per channel, as PyTorch's BatchNorm1d/2d:
//   y = (x - mean) / sqrt(var + eps) * weight + bias
// var the biased variance; weight starts at 1, bias at 0. Each training
// Forward moves the running statistics toward the batch's:
//   running_mean = (1 - momentum) * running_mean + momentum * mean
//   running_var  = (1 - momentum) * running_var  + momentum * var * n / (n - 1)
// (the unbiased variance, n values a channel), from 0 and 1. They are
// parameters that are not trained (Param::trainable false): each worker
// keeps its own between the points where they are averaged among the
// workers (roles/worker/allreduced_weights.h): checkpoints and epoch ends,
// or every step with sync_stats.
#include <cmath>

#include "src/nn/eigen_maps.h"
#include "src/nn/layers.h"

namespace pstrain {
namespace {

class BatchNorm : public Layer {
 public:
  explicit BatchNorm(const LayerConfig& c)
      : Layer(c.name), eps_(c.eps), momentum_(c.momentum), sync_stats_(c.sync_stats) {}

  StatusOr<Shape> Build(const Shape& input, uint64_t) override {
    if (input.empty() || NumElements(input) <= 0)
      return InvalidArgument("batch_norm expects a non-empty input, got " + ShapeString(input));
    channels_ = input[0];
    spatial_ = NumElements(input) / channels_;
    weight_ = NewParam(name(), "weight", {channels_});
    std::fill(weight_.value.data.begin(), weight_.value.data.end(), 1.0f);
    bias_ = NewParam(name(), "bias", {channels_});
    running_mean_ = NewParam(name(), "running_mean", {channels_});
    running_var_ = NewParam(name(), "running_var", {channels_});
    std::fill(running_var_.value.data.begin(), running_var_.value.data.end(), 1.0f);
    running_mean_.trainable = running_var_.trainable = false;
    running_mean_.synced_each_step = running_var_.synced_each_step = sync_stats_;
    mean_.assign(static_cast<size_t>(channels_), 0.0);
    inv_std_.assign(static_cast<size_t>(channels_), 0.0);
    return input;
  }

  void Forward(const Batch&, const Tensor& in, Tensor* out, bool training) override {
    out->Resize(in.shape);
    const int64_t n = in.dim(0);
    const double count = static_cast<double>(n * spatial_);
    // One value a channel (a batch of one vector) has no variance to learn
    // from: it is normalized by itself, and the running statistics keep
    // what they had (PyTorch refuses such a batch; an elastic epoch's rest
    // may give a worker one sample).
    const bool learns = training && count > 1;
    for (int64_t c = 0; c < channels_; ++c) {
      double mean = running_mean_.value.data[c], var = running_var_.value.data[c];
      if (training && count > 0) {
        // Each plane's sum in float (vectorized), the planes' in double.
        double sum = 0, sum_sq = 0;
        ForPlanes(n, c, [&](int64_t at) { sum += Plane(in, at).sum(); });
        mean = sum / count;
        const float m = static_cast<float>(mean);
        ForPlanes(n, c, [&](int64_t at) { sum_sq += (Plane(in, at) - m).square().sum(); });
        var = sum_sq / count;
        if (learns) {
          const double unbiased = var * count / (count - 1);
          running_mean_.value.data[c] =
              static_cast<float>((1 - momentum_) * running_mean_.value.data[c] + momentum_ * mean);
          running_var_.value.data[c] = static_cast<float>(
              (1 - momentum_) * running_var_.value.data[c] + momentum_ * unbiased);
        }
      }
      mean_[c] = mean;
      inv_std_[c] = 1.0 / std::sqrt(var + eps_);
      // Centred first: x * scale + (bias - mean * scale) would lose the
      // bits that a large mean cancels.
      const float m = static_cast<float>(mean), b = bias_.value.data[c];
      const float a = static_cast<float>(inv_std_[c] * weight_.value.data[c]);
      ForPlanes(n, c, [&](int64_t at) { Plane(out, at) = (Plane(in, at) - m) * a + b; });
    }
  }

  // Through the batch's statistics (training), with xh the normalized
  // input and m the values a channel:
  //   dx = weight * inv_std / m * (m * dy - sum(dy) - xh * sum(dy * xh))
  // which is dx = dy * a + (x - mean) * b + k per channel.
  void Backward(const Batch&, const Tensor& in, const Tensor&, const Tensor& dout,
                Tensor* din) override {
    const int64_t n = in.dim(0);
    const double count = static_cast<double>(n * spatial_);
    if (din != nullptr) din->Resize(in.shape);
    for (int64_t c = 0; c < channels_; ++c) {
      const float m = static_cast<float>(mean_[c]);
      double sum_dy = 0, sum_dy_xc = 0;  // xc = x - mean
      ForPlanes(n, c, [&](int64_t at) {
        sum_dy += Plane(dout, at).sum();
        sum_dy_xc += (Plane(dout, at) * (Plane(in, at) - m)).sum();
      });
      const double sum_dy_xh = sum_dy_xc * inv_std_[c];
      weight_.grad.data[c] = static_cast<float>(sum_dy_xh);
      bias_.grad.data[c] = static_cast<float>(sum_dy);
      if (din == nullptr) continue;
      const double scale = weight_.value.data[c] * inv_std_[c] / count;
      const double x_scale = -scale * sum_dy_xh * inv_std_[c];
      const float a = static_cast<float>(scale * count), b = static_cast<float>(x_scale);
      const float k = static_cast<float>(-scale * sum_dy);
      ForPlanes(n, c, [&](int64_t at) {
        Plane(din, at) = Plane(dout, at) * a + (Plane(in, at) - m) * b + k;
      });
    }
  }

  std::vector<Param*> Params() override {
    return {&weight_, &bias_, &running_mean_, &running_var_};
  }

 private:
  // Calls fn(at) for the offset of each sample's plane of channel c (its
  // spatial_ values) in a batch of n samples.
  template <typename Fn>
  void ForPlanes(int64_t n, int64_t c, const Fn& fn) const {
    for (int64_t s = 0; s < n; ++s) fn((s * channels_ + c) * spatial_);
  }
  ConstArrayMap Plane(const Tensor& t, int64_t at) const {
    return ConstArrayMap(t.ptr() + at, spatial_);
  }
  ArrayMap Plane(Tensor* t, int64_t at) const { return ArrayMap(t->ptr() + at, spatial_); }

  const double eps_, momentum_;
  const bool sync_stats_;
  int64_t channels_ = 0, spatial_ = 0;
  Param weight_, bias_, running_mean_, running_var_;
  std::vector<double> mean_, inv_std_;  // per channel, of the last Forward
};

}  // namespace

std::unique_ptr<Layer> NewBatchNorm(const LayerConfig& config) {
  return std::make_unique<BatchNorm>(config);
}

}  // namespace pstrain
