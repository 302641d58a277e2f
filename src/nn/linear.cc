// linear: y = x W^T + b, each sample's input flattened to F features.
#include <cassert>

#include "src/nn/eigen_maps.h"
#include "src/nn/init.h"
#include "src/nn/layers.h"

namespace pstrain {
namespace {

class Linear : public Layer {
 public:
  explicit Linear(const LayerConfig& c)
      : Layer(c.name),
        out_(c.out),
        has_bias_(c.bias),
        init_(c.init.empty() ? "he" : c.init),
        init_scale_(c.init_scale) {}

  StatusOr<Shape> Build(const Shape& input, uint64_t seed) override {
    in_ = NumElements(input);
    if (input.empty() || in_ <= 0) {
      return InvalidArgument("linear expects a non-empty input, got " + ShapeString(input));
    }
    weight_ = NewParam(name(), "weight", {out_, in_});
    InitWeight(init_, init_scale_, in_, out_, seed, &weight_);
    if (has_bias_) bias_ = NewParam(name(), "bias", {out_});
    return Shape{out_};
  }

  void Forward(const Batch&, const Tensor& in, Tensor* out, bool) override {
    const int64_t n = in.dim(0);
    assert(in.size() == n * in_);
    out->Resize({n, out_});
    RowMap y(out->ptr(), n, out_);
    y.noalias() = ConstRowMap(in.ptr(), n, in_) * Weight().transpose();
    if (has_bias_) y.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias_.value.ptr(), out_);
  }

  void Backward(const Batch&, const Tensor& in, const Tensor&, const Tensor& dout,
                Tensor* din) override {
    const int64_t n = in.dim(0);
    ConstRowMap dy(dout.ptr(), n, out_);
    RowMap(weight_.grad.ptr(), out_, in_).noalias() =
        dy.transpose() * ConstRowMap(in.ptr(), n, in_);
    if (has_bias_) {
      Eigen::Map<Eigen::RowVectorXf>(bias_.grad.ptr(), out_).noalias() = dy.colwise().sum();
    }
    if (din == nullptr) return;
    din->Resize(in.shape);
    RowMap(din->ptr(), n, in_).noalias() = dy * Weight();
  }

  std::vector<Param*> Params() override {
    if (has_bias_) return {&weight_, &bias_};
    return {&weight_};
  }

 private:
  ConstRowMap Weight() const { return ConstRowMap(weight_.value.ptr(), out_, in_); }

  const int64_t out_;
  const bool has_bias_;
  const std::string init_;
  const float init_scale_;
  int64_t in_ = 0;
  Param weight_;
  Param bias_;
};

}  // namespace

std::unique_ptr<Layer> NewLinear(const LayerConfig& config) {
  return std::make_unique<Linear>(config);
}

}  // namespace pstrain
