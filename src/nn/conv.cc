// conv2d as im2col + GEMM, a chunk of samples at a time.
//
// With a chunk's cols row-major [taps, P] (P = samples * Ho * Wo, see
// im2col.h) and the weight row-major [OC, taps], the column-major views are
// cols^T [P, taps] and W^T [taps, OC], so
//   forward:  Y = cols^T W^T          [P, OC]  (memory: [OC][samples][Ho*Wo])
//   backward: dW^T += cols dY         [taps, OC] (= dW row-major)
//             dcols^T = dY W          [P, taps]  (= dcols row-major)
// are plain GEMMs on views, no transposed copies. Only Y and dY are
// reordered between [OC][samples][Ho*Wo] and the tensors' [samples][OC][Ho*Wo],
// one pass over the output against the GEMMs' `taps` passes.
//
// Chunks keep the columns in L2 between im2col and the GEMM; in training
// all chunks' columns are kept for Backward, which costs memory (taps * Ho *
// Wo floats per sample) but saves redoing im2col. Evaluation, with no
// Backward to follow and larger batches, reuses one chunk's.
#include <algorithm>
#include <cassert>
#include <vector>

#include "src/nn/eigen_maps.h"
#include "src/nn/im2col.h"
#include "src/nn/init.h"
#include "src/nn/layers.h"

namespace pstrain {
namespace {

class Conv2d : public Layer {
 public:
  explicit Conv2d(const LayerConfig& c)
      : Layer(c.name),
        out_channels_(c.out_channels),
        has_bias_(c.bias),
        init_(c.init.empty() ? "he" : c.init),
        init_scale_(c.init_scale) {
    g_.kernel = c.kernel;
    g_.stride = c.stride > 0 ? c.stride : 1;
    g_.padding = c.padding;
  }

  StatusOr<Shape> Build(const Shape& input, uint64_t seed) override {
    if (input.size() != 3) {
      return InvalidArgument("conv2d expects input [C, H, W], got " + ShapeString(input));
    }
    g_.channels = input[0];
    g_.height = input[1];
    g_.width = input[2];
    const int64_t k = g_.kernel, p = g_.padding;
    if (g_.height + 2 * p < k || g_.width + 2 * p < k) {
      return InvalidArgument("conv2d kernel " + std::to_string(k) + " with padding " +
                             std::to_string(p) + " does not fit input " + ShapeString(input));
    }
    g_.out_height = (g_.height + 2 * p - k) / g_.stride + 1;
    g_.out_width = (g_.width + 2 * p - k) / g_.stride + 1;
    weight_ = NewParam(name(), "weight", {out_channels_, g_.channels, k, k});
    InitWeight(init_, init_scale_, g_.taps(), out_channels_ * k * k, seed, &weight_);
    if (has_bias_) bias_ = NewParam(name(), "bias", {out_channels_});
    return Shape{out_channels_, g_.out_height, g_.out_width};
  }

  void Forward(const Batch&, const Tensor& in, Tensor* out, bool training) override {
    const int64_t n = in.dim(0);
    assert(in.size() == n * InputSize());
    cols_.resize(std::min(n, training ? n : Chunk()) * g_.taps() * g_.positions());
    out->Resize({n, out_channels_, g_.out_height, g_.out_width});
    for (int64_t first = 0; first < n; first += Chunk()) {
      const int64_t count = std::min(Chunk(), n - first), rows = count * g_.positions();
      float* cols = training ? ChunkCols(first) : cols_.data();
      Im2Col(g_, in.ptr() + first * InputSize(), count, cols, &padded_);
      y_.resize(out_channels_ * rows);
      ColMap(y_.data(), rows, out_channels_).noalias() =
          ConstColMap(cols, rows, g_.taps()) * WeightT();
      float* samples = out->ptr() + first * OutputSize();
      ForEachPlane(count, [&](int64_t oc, int64_t g, int64_t t) {
        const float b = has_bias_ ? bias_.value.data[oc] : 0.0f;
        ArrayMap(samples + t, g_.positions()) = ConstArrayMap(y_.data() + g, g_.positions()) + b;
      });
    }
  }

  void Backward(const Batch&, const Tensor& in, const Tensor&, const Tensor& dout,
                Tensor* din) override {
    const int64_t n = in.dim(0);
    ColMap dw(weight_.grad.ptr(), g_.taps(), out_channels_);
    dw.setZero();
    if (has_bias_) std::fill(bias_.grad.data.begin(), bias_.grad.data.end(), 0.0f);
    if (din != nullptr) din->Resize(in.shape);
    for (int64_t first = 0; first < n; first += Chunk()) {
      const int64_t count = std::min(Chunk(), n - first), rows = count * g_.positions();
      dy_.resize(out_channels_ * rows);
      const float* samples = dout.ptr() + first * OutputSize();
      ForEachPlane(count, [&](int64_t, int64_t g, int64_t t) {
        ArrayMap(dy_.data() + g, g_.positions()) = ConstArrayMap(samples + t, g_.positions());
      });
      ConstColMap dy(dy_.data(), rows, out_channels_);
      if (has_bias_) ColMap(bias_.grad.ptr(), 1, out_channels_) += dy.colwise().sum();
      ConstColMap cols(ChunkCols(first), rows, g_.taps());
      dw.noalias() += cols.transpose() * dy;
      if (din == nullptr) continue;
      dcols_.resize(g_.taps() * rows);
      ColMap(dcols_.data(), rows, g_.taps()).noalias() = dy * WeightT().transpose();
      Col2Im(g_, dcols_.data(), count, din->ptr() + first * InputSize(), &padded_);
    }
  }

  std::vector<Param*> Params() override {
    if (has_bias_) return {&weight_, &bias_};
    return {&weight_};
  }

 private:
  // W^T [taps, OC]: the row-major weight [OC, taps] read column-major.
  ConstColMap WeightT() const { return ConstColMap(weight_.value.ptr(), g_.taps(), out_channels_); }
  int64_t InputSize() const { return g_.channels * g_.height * g_.width; }
  int64_t OutputSize() const { return out_channels_ * g_.positions(); }
  // Samples per GEMM: their columns (~512 KiB) stay in L2 from im2col to the
  // GEMM that reads them.
  int64_t Chunk() const { return std::max<int64_t>(1, (128 << 10) / (g_.taps() * g_.positions())); }
  float* ChunkCols(int64_t first) { return cols_.data() + first * g_.taps() * g_.positions(); }

  // A chunk of `count` samples is [OC][count][Ho*Wo] as GEMM rows and
  // [count][OC][Ho*Wo] as tensor samples: f(channel, gemm offset, tensor
  // offset) for each of its planes.
  template <typename F>
  void ForEachPlane(int64_t count, F f) const {
    const int64_t pos = g_.positions();
    for (int64_t oc = 0; oc < out_channels_; ++oc) {
      for (int64_t s = 0; s < count; ++s) {
        f(oc, (oc * count + s) * pos, (s * out_channels_ + oc) * pos);
      }
    }
  }

  const int64_t out_channels_;
  const bool has_bias_;
  const std::string init_;
  const float init_scale_;
  ConvGeometry g_;
  Param weight_;
  Param bias_;
  // Reused across calls: sized by the first batch, reallocated only if a
  // batch is larger.
  FloatBuffer cols_;    // im2col of the last Forward's input, chunk after chunk
  FloatBuffer dcols_;   // one chunk's gradient of it (Backward)
  FloatBuffer y_;       // one chunk's GEMM output, [OC][count][Ho*Wo]
  FloatBuffer dy_;      // one chunk of dout, ordered the same way
  FloatBuffer padded_;  // im2col/col2im scratch when padding > 0
};

}  // namespace

std::unique_ptr<Layer> NewConv2d(const LayerConfig& config) {
  return std::make_unique<Conv2d>(config);
}

}  // namespace pstrain
