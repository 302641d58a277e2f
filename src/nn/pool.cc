// maxpool and avgpool over square windows, per channel.
//
// maxpool pads with -inf (padding never wins) and remembers, per output,
// where in its input plane the maximum was, so Backward routes dout there.
// avgpool counts the padding as zeros (PyTorch's count_include_pad=True
// default): every output divides by kernel * kernel, so its gradient is the
// same everywhere. CreateLayer keeps padding <= kernel / 2, so every window
// holds at least one input element.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <vector>

#include "src/nn/layers.h"

namespace pstrain {
namespace {

class Pool : public Layer {
 public:
  explicit Pool(const LayerConfig& c)
      : Layer(c.name),
        max_(c.type == LayerType::kMaxpool),
        kernel_(c.kernel),
        stride_(c.stride > 0 ? c.stride : c.kernel),
        padding_(c.padding) {}

  StatusOr<Shape> Build(const Shape& input, uint64_t) override {
    const char* type = max_ ? "maxpool" : "avgpool";
    if (input.size() != 3) {
      return InvalidArgument(std::string(type) + " expects input [C, H, W], got " +
                             ShapeString(input));
    }
    channels_ = input[0];
    height_ = input[1];
    width_ = input[2];
    if (height_ + 2 * padding_ < kernel_ || width_ + 2 * padding_ < kernel_) {
      return InvalidArgument(std::string(type) + " kernel " + std::to_string(kernel_) +
                             " does not fit input " + ShapeString(input));
    }
    out_height_ = (height_ + 2 * padding_ - kernel_) / stride_ + 1;
    out_width_ = (width_ + 2 * padding_ - kernel_) / stride_ + 1;
    return Shape{channels_, out_height_, out_width_};
  }

  void Forward(const Batch&, const Tensor& in, Tensor* out, bool) override {
    const int64_t n = in.dim(0), planes = n * channels_;
    assert(in.size() == planes * height_ * width_);
    out->Resize({n, channels_, out_height_, out_width_});
    if (max_) argmax_.resize(out->data.size());
    const float scale = 1.0f / static_cast<float>(kernel_ * kernel_);
    // Without padding every window is whole, and for the common kernel sizes
    // a compile-time size unrolls its loops (3x faster).
    const int64_t whole = padding_ == 0 ? kernel_ : 0;
    for (int64_t p = 0; p < planes; ++p) {
      const float* src = in.ptr() + p * height_ * width_;
      for (int64_t oh = 0; oh < out_height_; ++oh) {
        for (int64_t ow = 0; ow < out_width_; ++ow) {
          const int64_t o = (p * out_height_ + oh) * out_width_ + ow;
          const Window w = WindowAt(oh, ow);
          if (max_) {
            float* value = out->ptr() + o;
            int32_t* where = argmax_.data() + o;
            if (whole == 2) {
              MaxOf<2>(src, w, value, where);
            } else if (whole == 3) {
              MaxOf<3>(src, w, value, where);
            } else {
              MaxOf<0>(src, w, value, where);
            }
            continue;
          }
          float sum = 0.0f;
          for (int64_t h = w.h0; h < w.h1; ++h) {
            for (int64_t x = w.w0; x < w.w1; ++x) sum += src[h * width_ + x];
          }
          out->data[o] = sum * scale;
        }
      }
    }
  }

  void Backward(const Batch&, const Tensor& in, const Tensor&, const Tensor& dout,
                Tensor* din) override {
    if (din == nullptr) return;
    din->Resize(in.shape);
    std::memset(din->ptr(), 0, sizeof(float) * din->data.size());
    const int64_t planes = in.dim(0) * channels_;
    const float scale = 1.0f / static_cast<float>(kernel_ * kernel_);
    for (int64_t p = 0; p < planes; ++p) {
      float* dst = din->ptr() + p * height_ * width_;
      for (int64_t oh = 0; oh < out_height_; ++oh) {
        for (int64_t ow = 0; ow < out_width_; ++ow) {
          const int64_t o = (p * out_height_ + oh) * out_width_ + ow;
          if (max_) {
            dst[argmax_[o]] += dout.data[o];
            continue;
          }
          const Window w = WindowAt(oh, ow);
          const float g = dout.data[o] * scale;
          for (int64_t h = w.h0; h < w.h1; ++h) {
            for (int64_t x = w.w0; x < w.w1; ++x) dst[h * width_ + x] += g;
          }
        }
      }
    }
  }

 private:
  // The in-bounds part of an output's window: rows [h0, h1), columns [w0, w1).
  struct Window {
    int64_t h0, h1, w0, w1;
  };
  Window WindowAt(int64_t oh, int64_t ow) const {
    const int64_t h = oh * stride_ - padding_, w = ow * stride_ - padding_;
    return {std::max<int64_t>(h, 0), std::min(h + kernel_, height_), std::max<int64_t>(w, 0),
            std::min(w + kernel_, width_)};
  }

  // The window's maximum and its index in the plane; K > 0 says the window
  // is whole and K x K. Written so that GCC emits maxss and a conditional
  // move: a branch on which element wins mispredicts on real data, which made
  // this loop 5x slower.
  template <int K>
  void MaxOf(const float* src, const Window& w, float* value, int32_t* where) const {
    const int64_t rows = K > 0 ? K : w.h1 - w.h0, columns = K > 0 ? K : w.w1 - w.w0;
    const auto first = static_cast<int32_t>(w.h0 * width_ + w.w0);
    int32_t best = first;
    float best_value = src[first];
    for (int64_t h = 0; h < rows; ++h) {
      for (int64_t x = 0; x < columns; ++x) {
        const auto at = static_cast<int32_t>(first + h * width_ + x);
        best = src[at] > best_value ? at : best;
        best_value = std::max(src[at], best_value);
      }
    }
    *value = best_value;
    *where = best;
  }

  const bool max_;
  const int64_t kernel_, stride_, padding_;
  int64_t channels_ = 0, height_ = 0, width_ = 0, out_height_ = 0, out_width_ = 0;
  std::vector<int32_t> argmax_;  // maxpool: per output, its index in its input plane
};

}  // namespace

std::unique_ptr<Layer> NewPool(const LayerConfig& config) { return std::make_unique<Pool>(config); }

}  // namespace pstrain
