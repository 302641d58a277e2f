// relu, sigmoid, tanh, gelu: elementwise, vectorized by Eigen where it
// has the function. Backward uses the forward output for the first three
// (their derivatives are cheap functions of it) and the input for gelu.
#include <cmath>

#include "src/nn/eigen_maps.h"
#include "src/nn/layers.h"

namespace pstrain {
namespace {

enum class Kind { kRelu, kSigmoid, kTanh, kGelu };

// GELU as PyTorch's default (exact, not the tanh approximation):
// x * Phi(x), Phi the standard normal CDF; its derivative is
// Phi(x) + x * phi(x), phi the density.
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

void GeluForward(const float* x, int64_t size, float* y) {
  for (int64_t i = 0; i < size; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * kInvSqrt2)));
  }
}

void GeluBackward(const float* x, const float* dy, int64_t size, float* dx) {
  for (int64_t i = 0; i < size; ++i) {
    const double v = x[i];
    const double cdf = 0.5 * (1.0 + std::erf(v * kInvSqrt2));
    const double pdf = kInvSqrt2Pi * std::exp(-0.5 * v * v);
    dx[i] = static_cast<float>(dy[i] * (cdf + v * pdf));
  }
}

// A plain loop that GCC turns into branch-free vector code (Eigen 3.4's
// select() is scalar, and a branch on the sign mispredicts half the time).
void ReluBackward(const float* y, const float* dy, int64_t size, float* dx) {
  for (int64_t i = 0; i < size; ++i) {
    const float g = dy[i];  // loaded unconditionally, so the select needs no branch
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

class Activation : public Layer {
 public:
  explicit Activation(const LayerConfig& c)
      : Layer(c.name),
        kind_(c.type == LayerType::kRelu      ? Kind::kRelu
              : c.type == LayerType::kSigmoid ? Kind::kSigmoid
              : c.type == LayerType::kGelu    ? Kind::kGelu
                                              : Kind::kTanh) {}

  StatusOr<Shape> Build(const Shape& input, uint64_t) override { return input; }

  void Forward(const Batch&, const Tensor& in, Tensor* out, bool) override {
    out->Resize(in.shape);
    ConstArrayMap x(in.ptr(), in.size());
    ArrayMap y(out->ptr(), out->size());
    switch (kind_) {
      case Kind::kRelu:
        y = x.max(0.0f);
        break;
      case Kind::kSigmoid:
        y = x.logistic();
        break;
      case Kind::kTanh:
        y = x.tanh();
        break;
      case Kind::kGelu:
        GeluForward(in.ptr(), in.size(), out->ptr());
        break;
    }
  }

  void Backward(const Batch&, const Tensor& in, const Tensor& out, const Tensor& dout,
                Tensor* din) override {
    if (din == nullptr) return;
    din->Resize(out.shape);
    ConstArrayMap y(out.ptr(), out.size());
    ConstArrayMap dy(dout.ptr(), dout.size());
    ArrayMap dx(din->ptr(), din->size());
    switch (kind_) {
      case Kind::kRelu:
        ReluBackward(y.data(), dy.data(), y.size(), dx.data());
        break;
      case Kind::kSigmoid:
        dx = dy * y * (1.0f - y);
        break;
      case Kind::kTanh:
        dx = dy * (1.0f - y.square());
        break;
      case Kind::kGelu:
        GeluBackward(in.ptr(), dy.data(), dy.size(), dx.data());
        break;
    }
  }

 private:
  const Kind kind_;
};

}  // namespace

std::unique_ptr<Layer> NewActivation(const LayerConfig& config) {
  return std::make_unique<Activation>(config);
}

}  // namespace pstrain
