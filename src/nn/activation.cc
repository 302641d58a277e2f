// relu, sigmoid, tanh: elementwise, vectorized by Eigen. Backward uses the
// forward output (all three derivatives are cheap functions of it).
#include "src/nn/eigen_maps.h"
#include "src/nn/layers.h"

namespace pstrain {
namespace {

enum class Kind { kRelu, kSigmoid, kTanh };

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
    }
  }

  void Backward(const Batch&, const Tensor&, const Tensor& out, const Tensor& dout,
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
