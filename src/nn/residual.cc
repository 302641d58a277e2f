// residual: y = body(x) + x, or body(x) + projection(x) where the body
// changes the shape (a 1x1 conv2d with a stride, a linear). The body is a
// list of layers run in order; their parameters are named after the block
// ("block1.conv2d0.weight", "block1.projection.weight").
#include <fmt/format.h>

#include "src/nn/eigen_maps.h"
#include "src/nn/layers.h"

namespace pstrain {
namespace {

class Residual : public Layer {
 public:
  Residual(std::string name, std::vector<std::unique_ptr<Layer>> body,
           std::unique_ptr<Layer> projection)
      : Layer(std::move(name)),
        body_(std::move(body)),
        projection_(std::move(projection)),
        outs_(body_.size()),
        douts_(body_.size()) {}

  StatusOr<Shape> Build(const Shape& input, uint64_t seed) override {
    Shape shape = input;
    for (size_t i = 0; i < body_.size(); ++i) {
      auto out = body_[i]->Build(shape, seed);
      if (!out.ok())
        return out.status().WithContext(fmt::format("its layer {} ({})", i, body_[i]->name()));
      shape = *out;
    }
    Shape skip = input;
    if (projection_) {
      auto out = projection_->Build(input, seed);
      if (!out.ok()) return out.status().WithContext("its projection");
      skip = *out;
    }
    if (shape == skip) return shape;
    if (projection_)
      return InvalidArgument(fmt::format("the body's output {} differs from the projection's {}",
                                         ShapeString(shape), ShapeString(skip)));
    return InvalidArgument(fmt::format(
        "the body's output {} differs from the block's input {}: add a projection that makes it",
        ShapeString(shape), ShapeString(input)));
  }

  void Forward(const Batch& batch, const Tensor& in, Tensor* out, bool training) override {
    for (size_t i = 0; i < body_.size(); ++i)
      body_[i]->Forward(batch, i == 0 ? in : outs_[i - 1], &outs_[i], training);
    const Tensor* skip = &in;
    if (projection_) {
      projection_->Forward(batch, in, &projected_, training);
      skip = &projected_;
    }
    const Tensor& body = outs_.back();
    out->Resize(body.shape);
    ArrayMap(out->ptr(), out->size()) =
        ConstArrayMap(body.ptr(), body.size()) + ConstArrayMap(skip->ptr(), skip->size());
  }

  // The sum passes dout to the body's last layer and to the skip path; the
  // block's din adds what both give back.
  void Backward(const Batch& batch, const Tensor& in, const Tensor&, const Tensor& dout,
                Tensor* din) override {
    for (size_t i = body_.size(); i-- > 0;) {
      const Tensor& d = i + 1 == body_.size() ? dout : douts_[i];
      Tensor* dprev = i > 0 ? &douts_[i - 1] : din != nullptr ? &dbody_in_ : nullptr;
      body_[i]->Backward(batch, i == 0 ? in : outs_[i - 1], outs_[i], d, dprev);
    }
    if (projection_)
      projection_->Backward(batch, in, projected_, dout, din != nullptr ? &dskip_in_ : nullptr);
    if (din == nullptr) return;
    const Tensor& dskip = projection_ ? dskip_in_ : dout;
    din->Resize(in.shape);
    ArrayMap(din->ptr(), din->size()) =
        ConstArrayMap(dbody_in_.ptr(), dbody_in_.size()) + ConstArrayMap(dskip.ptr(), dskip.size());
  }

  std::vector<Param*> Params() override {
    std::vector<Param*> out;
    for (auto& layer : body_)
      for (Param* p : layer->Params()) out.push_back(p);
    if (projection_)
      for (Param* p : projection_->Params()) out.push_back(p);
    return out;
  }

  void SetTrainingForwards(uint64_t done) override {
    for (auto& layer : body_) layer->SetTrainingForwards(done);
    if (projection_) projection_->SetTrainingForwards(done);
  }

 private:
  std::vector<std::unique_ptr<Layer>> body_;
  std::unique_ptr<Layer> projection_;  // null: the input is added as it is
  std::vector<Tensor> outs_, douts_;   // as Model's: each body layer's output and its gradient
  Tensor projected_, dbody_in_, dskip_in_;
};

}  // namespace

StatusOr<std::unique_ptr<Layer>> NewResidual(const LayerConfig& config,
                                             const LayerContext& context) {
  if (config.layers.empty()) return InvalidArgument("residual needs a non-empty list of layers");
  std::vector<std::unique_ptr<Layer>> body;
  for (size_t i = 0; i < config.layers.size(); ++i) {
    LayerConfig sub = config.layers[i];
    sub.name = config.name + "." + SubLayerName(sub, i);
    auto layer = CreateLayer(sub, context);
    if (!layer.ok())
      return layer.status().WithContext(fmt::format("its layer {} ({})", i, sub.name));
    body.push_back(std::move(*layer));
  }
  std::unique_ptr<Layer> projection;
  if (!config.projection.empty()) {
    LayerConfig sub = config.projection[0];
    sub.name = config.name + ".projection";
    auto layer = CreateLayer(sub, context);
    if (!layer.ok()) return layer.status().WithContext("its projection");
    projection = std::move(*layer);
  }
  return std::unique_ptr<Layer>(
      std::make_unique<Residual>(config.name, std::move(body), std::move(projection)));
}

}  // namespace pstrain
