// MakeLayer: checks a layer's config fields and dispatches to its type.
#include <string>

#include "src/nn/init.h"
#include "src/nn/layers.h"

namespace pstrain {
namespace {

Status Require(bool ok, const LayerConfig& c, const std::string& what) {
  if (ok) return Status::OK();
  return InvalidArgument(LayerTypeName(c.type) + (" needs " + what));
}

// The fields that kernel-based layers share.
Status CheckWindow(const LayerConfig& c) {
  PSTRAIN_RETURN_IF_ERROR(Require(c.kernel > 0, c, "kernel > 0"));
  PSTRAIN_RETURN_IF_ERROR(Require(c.stride >= 0, c, "stride >= 0 (0: default)"));
  return Require(c.padding >= 0, c, "padding >= 0");
}

Status CheckInit(const LayerConfig& c) {
  if (c.init.empty() || IsKnownInit(c.init)) return Status::OK();
  return InvalidArgument("unknown init \"" + c.init + "\" (xavier|he|normal|uniform|zeros)");
}

}  // namespace

std::string ShapeString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + "]";
}

Param NewParam(const std::string& layer, const char* suffix, const Shape& shape) {
  return Param{layer + "." + suffix, Tensor(shape), Tensor(shape)};
}

StatusOr<std::unique_ptr<Layer>> CreateLayer(const LayerConfig& c, const LayerContext& context) {
  PSTRAIN_RETURN_IF_ERROR(CheckInit(c));
  switch (c.type) {
    case LayerType::kLinear:
      PSTRAIN_RETURN_IF_ERROR(Require(c.out > 0, c, "out > 0"));
      return NewLinear(c);
    case LayerType::kConv2d:
      PSTRAIN_RETURN_IF_ERROR(Require(c.out_channels > 0, c, "out_channels > 0"));
      PSTRAIN_RETURN_IF_ERROR(CheckWindow(c));
      return NewConv2d(c);
    case LayerType::kMaxpool:
    case LayerType::kAvgpool:
      PSTRAIN_RETURN_IF_ERROR(CheckWindow(c));
      // As PyTorch: every window then holds at least one input element.
      PSTRAIN_RETURN_IF_ERROR(Require(c.padding <= c.kernel / 2, c, "padding <= kernel / 2"));
      return NewPool(c);
    case LayerType::kRelu:
    case LayerType::kSigmoid:
    case LayerType::kTanh:
    case LayerType::kGelu:
      return NewActivation(c);
    case LayerType::kLayerNorm:
      PSTRAIN_RETURN_IF_ERROR(Require(c.eps > 0.0f, c, "eps > 0"));
      return NewLayerNorm(c);
    case LayerType::kResidual:
      return NewResidual(c, context);
    case LayerType::kBatchNorm:
      PSTRAIN_RETURN_IF_ERROR(Require(c.eps > 0.0f, c, "eps > 0"));
      PSTRAIN_RETURN_IF_ERROR(
          Require(c.momentum >= 0.0f && c.momentum < 1.0f, c, "momentum in [0, 1)"));
      return NewBatchNorm(c);
    case LayerType::kAugment:
      PSTRAIN_RETURN_IF_ERROR(Require(c.flip == "horizontal" || c.crop_pad > 0, c,
                                      "flip: horizontal or a crop (it would change nothing)"));
      PSTRAIN_RETURN_IF_ERROR(Require(c.crop_pad >= 0 && c.crop_pad <= kMaxCropPad, c,
                                      "crop pad in 1.." + std::to_string(kMaxCropPad)));
      return NewAugment(c);
    case LayerType::kDropout:
      PSTRAIN_RETURN_IF_ERROR(Require(c.rate >= 0.0f && c.rate < 1.0f, c, "rate in [0, 1)"));
      return NewDropout(c);
    case LayerType::kFlatten:
      return NewFlatten(c);
    case LayerType::kConcat:
      return NewConcat(c, context.dense);
    case LayerType::kEmbeddingBag:
      PSTRAIN_RETURN_IF_ERROR(Require(c.vocab > 0, c, "vocab > 0"));
      PSTRAIN_RETURN_IF_ERROR(Require(c.dim > 0, c, "dim > 0"));
      PSTRAIN_RETURN_IF_ERROR(Require(c.mode == "sum" || c.mode == "mean" || c.mode == "concat", c,
                                      "mode sum|mean|concat, not \"" + c.mode + "\""));
      return NewEmbeddingBag(c);
  }
  // Only a config built in code, not one read from YAML, gets here.
  return InvalidArgument("unknown layer type " + std::to_string(static_cast<int>(c.type)));
}

StatusOr<std::unique_ptr<Layer>> MakeLayer(const LayerConfig& config) {
  LayerConfig named = config;
  if (named.name.empty()) named.name = LayerTypeName(named.type);
  auto layer = CreateLayer(named, LayerContext{});
  if (layer.ok()) return layer;
  std::string where = "layer " + named.name;
  if (config.line > 0) where += " at line " + std::to_string(config.line);
  return layer.status().WithContext(where);
}

}  // namespace pstrain
