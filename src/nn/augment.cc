// augment: random changes to training images, [C, H, W] each, as
// torchvision's RandomHorizontalFlip and RandomCrop(size, padding):
//   flip: horizontal  each image mirrored left to right with probability 1/2;
//   crop: {pad: P}    each image padded with P zeros on every side, then an
//                     H x W window of it taken at a random offset.
// Evaluation passes images through unchanged. As dropout's mask, the k-th
// training Forward's choices are a pure function of (build seed, layer name,
// k, image index), so a run is reproducible and a resumed one draws what an
// uninterrupted one would (Layer::SetTrainingForwards).
#include <cstring>

#include "src/common/random.h"
#include "src/nn/layers.h"

namespace pstrain {
namespace {

class Augment : public Layer {
 public:
  explicit Augment(const LayerConfig& c)
      : Layer(c.name), flip_(c.flip == "horizontal"), pad_(c.crop_pad) {}

  StatusOr<Shape> Build(const Shape& input, uint64_t seed) override {
    if (input.size() != 3)
      return InvalidArgument("augment expects images [C, H, W], got " + ShapeString(input));
    key_ = StreamKey(seed, name());
    return input;
  }

  void Forward(const Batch&, const Tensor& in, Tensor* out, bool training) override {
    out->Resize(in.shape);
    changed_ = training;
    if (!training) {
      std::memcpy(out->ptr(), in.ptr(), sizeof(float) * in.data.size());
      return;
    }
    Draw(in.dim(0));
    const Geometry g = GeometryOf(in);
    for (int64_t n = 0; n < g.images; ++n)
      for (int64_t c = 0; c < g.channels; ++c)
        for (int64_t y = 0; y < g.height; ++y)
          for (int64_t x = 0; x < g.width; ++x)
            out->data[g.At(n, c, y, x)] = Source(g, n, c, y, x, in.ptr());
  }

  // The same mapping backwards: each output pixel's gradient goes to the
  // input pixel it was read from; padding's zeros take none.
  void Backward(const Batch&, const Tensor& in, const Tensor&, const Tensor& dout,
                Tensor* din) override {
    if (din == nullptr) return;
    din->Resize(in.shape);
    if (!changed_) {
      std::memcpy(din->ptr(), dout.ptr(), sizeof(float) * dout.data.size());
      return;
    }
    std::fill(din->data.begin(), din->data.end(), 0.0f);
    const Geometry g = GeometryOf(in);
    for (int64_t n = 0; n < g.images; ++n)
      for (int64_t c = 0; c < g.channels; ++c)
        for (int64_t y = 0; y < g.height; ++y)
          for (int64_t x = 0; x < g.width; ++x) {
            const int64_t from = SourceIndex(g, n, c, y, x);
            if (from >= 0) din->data[from] += dout.data[g.At(n, c, y, x)];
          }
  }

  void SetTrainingForwards(uint64_t done) override { counter_ = done; }

 private:
  struct Geometry {
    int64_t images, channels, height, width;
    int64_t At(int64_t n, int64_t c, int64_t y, int64_t x) const {
      return ((n * channels + c) * height + y) * width + x;
    }
  };
  static Geometry GeometryOf(const Tensor& t) { return {t.dim(0), t.dim(1), t.dim(2), t.dim(3)}; }

  // Each image's choices for this Forward: flipped or not, and the crop's
  // offset into the padded image (pad, pad: the image as it was).
  struct Choice {
    bool flip = false;
    int64_t dy = 0, dx = 0;
  };
  void Draw(int64_t images) {
    const uint64_t stream = Mix64(key_ ^ Mix64(counter_++));
    choices_.resize(static_cast<size_t>(images));
    const uint64_t offsets = static_cast<uint64_t>(2 * pad_ + 1);
    for (int64_t n = 0; n < images; ++n) {
      const uint64_t bits = Mix64(stream + static_cast<uint64_t>(n));
      Choice& choice = choices_[static_cast<size_t>(n)];
      choice.flip = flip_ && (bits & 1) != 0;
      choice.dy = static_cast<int64_t>((bits >> 8) % offsets);
      choice.dx = static_cast<int64_t>((bits >> 32) % offsets);
    }
  }

  // Where output pixel (y, x) of image n reads the input; -1: padding.
  int64_t SourceIndex(const Geometry& g, int64_t n, int64_t c, int64_t y, int64_t x) const {
    const Choice& choice = choices_[static_cast<size_t>(n)];
    const int64_t sy = y + choice.dy - pad_;
    int64_t sx = x + choice.dx - pad_;
    if (sy < 0 || sy >= g.height || sx < 0 || sx >= g.width) return -1;
    if (choice.flip) sx = g.width - 1 - sx;
    return g.At(n, c, sy, sx);
  }
  float Source(const Geometry& g, int64_t n, int64_t c, int64_t y, int64_t x,
               const float* in) const {
    const int64_t from = SourceIndex(g, n, c, y, x);
    return from < 0 ? 0.0f : in[from];
  }

  const bool flip_;
  const int64_t pad_;
  uint64_t key_ = 0;
  uint64_t counter_ = 0;  // training Forwards so far
  bool changed_ = false;  // whether the last Forward augmented
  std::vector<Choice> choices_;
};

}  // namespace

std::unique_ptr<Layer> NewAugment(const LayerConfig& config) {
  return std::make_unique<Augment>(config);
}

}  // namespace pstrain
