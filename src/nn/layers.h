// Internal to src/nn: the constructor of each layer type and what the layer
// files share. The module's API is layer.h (MakeLayer) and model.h.
#pragma once

#include <memory>
#include <string>

#include "src/common/config/model_config.h"
#include "src/common/status.h"
#include "src/nn/layer.h"

namespace pstrain {

// What a layer may need from its model beyond its own input: concat appends
// the batch's dense features, one sample of which has the model's input shape.
struct LayerContext {
  Shape dense;  // ModelConfig.input; empty: unknown (concat cannot be built)
};

// MakeLayer with the model's context. Its errors do not say which layer they
// are about: the caller knows better (its index, tower and config line).
StatusOr<std::unique_ptr<Layer>> CreateLayer(const LayerConfig& config,
                                             const LayerContext& context);

// "[1, 28, 28]".
std::string ShapeString(const Shape& shape);

// The parameter "<layer>.<suffix>" of `shape`, value and grad zero.
Param NewParam(const std::string& layer, const char* suffix, const Shape& shape);

// One constructor per type; CreateLayer has validated the fields they read.
std::unique_ptr<Layer> NewLinear(const LayerConfig& config);
std::unique_ptr<Layer> NewConv2d(const LayerConfig& config);
std::unique_ptr<Layer> NewPool(const LayerConfig& config);        // maxpool, avgpool
std::unique_ptr<Layer> NewActivation(const LayerConfig& config);  // relu, sigmoid, tanh, gelu
std::unique_ptr<Layer> NewLayerNorm(const LayerConfig& config);
std::unique_ptr<Layer> NewAugment(const LayerConfig& config);
std::unique_ptr<Layer> NewBatchNorm(const LayerConfig& config);
// Its layers are made by CreateLayer, so their errors come back here.
StatusOr<std::unique_ptr<Layer>> NewResidual(const LayerConfig& config,
                                             const LayerContext& context);
std::unique_ptr<Layer> NewDropout(const LayerConfig& config);
std::unique_ptr<Layer> NewFlatten(const LayerConfig& config);
std::unique_ptr<Layer> NewConcat(const LayerConfig& config, const Shape& dense);
std::unique_ptr<Layer> NewEmbeddingBag(const LayerConfig& config);

}  // namespace pstrain
