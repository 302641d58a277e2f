// embedding_bag: looks up each sample's `fields` ids (batch.sparse) in a
// [vocab, dim] table and sums them, averages them, or lays them side by side.
// Its input shape is the ids' [fields]; the input tensor itself is ignored.
// With `slots` (the columns that name it, data.columns' table:) it reads
// only those of the sample's id slots, in that order.
// With weights (batch.sparse_weights: libsvm values, multi-hot slots) each
// row is scaled by its id's weight first, and mean divides by the sample's
// sum of weights instead of `fields` (TensorFlow's weighted combiners): an
// unused multi-hot slot, weight 0, then counts for nothing.
#include <cassert>
#include <cstring>
#include <string>
#include <vector>

#include "src/nn/eigen_maps.h"
#include "src/nn/init.h"
#include "src/nn/layers.h"

namespace pstrain {
namespace {

enum class Mode { kSum, kMean, kConcat };

using Row = Eigen::Map<Eigen::VectorXf>;
using ConstRow = Eigen::Map<const Eigen::VectorXf>;

class EmbeddingBag : public Layer {
 public:
  explicit EmbeddingBag(const LayerConfig& c)
      : Layer(c.name),
        vocab_(c.vocab),
        dim_(c.dim),
        mode_(c.mode == "sum"    ? Mode::kSum
              : c.mode == "mean" ? Mode::kMean
                                 : Mode::kConcat),
        init_(c.init.empty() ? "normal" : c.init),
        init_scale_(c.init_scale),
        slots_(c.slots.begin(), c.slots.end()) {}

  StatusOr<Shape> Build(const Shape& input, uint64_t seed) override {
    if (input.size() != 1 || input[0] <= 0) {
      return InvalidArgument("embedding_bag expects the sparse ids [fields], got " +
                             ShapeString(input));
    }
    for (int64_t slot : slots_)
      if (slot < 0 || slot >= input[0])
        return InvalidArgument("embedding_bag reads id slot " + std::to_string(slot) +
                               " of a sample's " + std::to_string(input[0]));
    sample_ids_ = input[0];
    fields_ = slots_.empty() ? sample_ids_ : static_cast<int64_t>(slots_.size());
    weight_ = NewParam(name(), "weight", {vocab_, dim_});
    InitWeight(init_, init_scale_, dim_, vocab_, seed, &weight_);
    return Shape{mode_ == Mode::kConcat ? fields_ * dim_ : dim_};
  }

  void Forward(const Batch& batch, const Tensor&, Tensor* out, bool) override {
    assert(batch.fields == sample_ids_);
    const int64_t n = static_cast<int64_t>(batch.sparse.size()) / sample_ids_;
    const int64_t width = mode_ == Mode::kConcat ? fields_ * dim_ : dim_;
    out->Resize({n, width});
    for (int64_t s = 0; s < n; ++s) {
      float* dst = out->ptr() + s * width;
      if (mode_ != Mode::kConcat) Row(dst, dim_).setZero();
      for (int64_t f = 0; f < fields_; ++f) {
        ConstRow row(weight_.value.ptr() + Id(batch, s, f) * dim_, dim_);
        const float w = Weight(batch, s, f);
        if (mode_ == Mode::kConcat) {
          Row(dst + f * dim_, dim_) = row * w;
        } else {
          Row(dst, dim_) += row * w;
        }
      }
      if (mode_ == Mode::kMean) Row(dst, dim_) *= MeanScale(batch, s);
    }
  }

  // The whole table's gradient, dense: simple, and fine for small vocabularies.
  void Backward(const Batch& batch, const Tensor& in, const Tensor&, const Tensor& dout,
                Tensor* din) override {
    const int64_t n = static_cast<int64_t>(batch.sparse.size()) / sample_ids_;
    const int64_t width = mode_ == Mode::kConcat ? fields_ * dim_ : dim_;
    std::memset(weight_.grad.ptr(), 0, sizeof(float) * weight_.grad.data.size());
    for (int64_t s = 0; s < n; ++s) {
      const float* dy = dout.ptr() + s * width;
      const float scale = mode_ == Mode::kMean ? MeanScale(batch, s) : 1.0f;
      for (int64_t f = 0; f < fields_; ++f) {
        Row grad(weight_.grad.ptr() + Id(batch, s, f) * dim_, dim_);
        const float w = Weight(batch, s, f);
        if (mode_ == Mode::kConcat) {
          grad += ConstRow(dy + f * dim_, dim_) * w;
        } else {
          grad += ConstRow(dy, dim_) * (scale * w);
        }
      }
    }
    if (din == nullptr) return;
    din->Resize(in.shape);  // the ids are not differentiable
    std::memset(din->ptr(), 0, sizeof(float) * din->data.size());
  }

  std::vector<Param*> Params() override { return {&weight_}; }

 private:
  // Where the sample's `field`-th id this layer reads is in batch.sparse.
  size_t At(int64_t sample, int64_t field) const {
    return static_cast<size_t>(sample * sample_ids_ + (slots_.empty() ? field : slots_[field]));
  }

  // The reader validates ids; one out of range here is a bug.
  int64_t Id(const Batch& batch, int64_t sample, int64_t field) const {
    const int64_t id = batch.sparse[At(sample, field)];
    assert(id >= 0 && id < vocab_);
    return id;
  }

  float Weight(const Batch& batch, int64_t sample, int64_t field) const {
    if (batch.sparse_weights.empty()) return 1.0f;
    return batch.sparse_weights[At(sample, field)];
  }

  // 1 / the sample's total weight (0 when it is 0: no ids, a zero row).
  float MeanScale(const Batch& batch, int64_t sample) const {
    if (batch.sparse_weights.empty()) return 1.0f / static_cast<float>(fields_);
    float total = 0;
    for (int64_t f = 0; f < fields_; ++f) total += Weight(batch, sample, f);
    return total == 0 ? 0.0f : 1.0f / total;
  }

  const int64_t vocab_, dim_;
  const Mode mode_;
  const std::string init_;
  const float init_scale_;
  const std::vector<int64_t> slots_;  // empty: every slot
  int64_t sample_ids_ = 0;            // a sample's id slots
  int64_t fields_ = 0;                // of them, the ones read
  Param weight_;
};

}  // namespace

std::unique_ptr<Layer> NewEmbeddingBag(const LayerConfig& config) {
  return std::make_unique<EmbeddingBag>(config);
}

}  // namespace pstrain
