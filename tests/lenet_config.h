// LeNet as configs/lenet_fashion_mnist.yaml describes it, built in code, and
// the layer-spec helpers it is written with: for the tests of the CPU layers
// (nn_test) and the GPU layers (gpu_test).
#pragma once

#include <cstdint>

#include "src/common/config/model_config.h"

namespace pstrain {
namespace testing {

inline LayerConfig Spec(LayerType type, int line = 0) {
  LayerConfig c;
  c.type = type;
  c.line = line;
  return c;
}

inline LayerConfig Window(LayerType type, int kernel, int stride = 0, int padding = 0) {
  LayerConfig c = Spec(type);
  c.kernel = kernel;
  c.stride = stride;
  c.padding = padding;
  return c;
}

inline LayerConfig Conv(int64_t out_channels, int kernel, int stride = 0, int padding = 0) {
  LayerConfig c = Window(LayerType::kConv2d, kernel, stride, padding);
  c.out_channels = out_channels;
  return c;
}

inline LayerConfig Linear(int64_t out) {
  LayerConfig c = Spec(LayerType::kLinear);
  c.out = out;
  return c;
}

// configs/lenet_fashion_mnist.yaml.
inline ModelConfig LeNet() {
  ModelConfig config;
  config.input = {1, 28, 28};
  config.layers = {Conv(6, 5, 1, 2),
                   Spec(LayerType::kRelu),
                   Window(LayerType::kMaxpool, 2),
                   Conv(16, 5),
                   Spec(LayerType::kRelu),
                   Window(LayerType::kMaxpool, 2),
                   Spec(LayerType::kFlatten),
                   Linear(120),
                   Spec(LayerType::kRelu),
                   Linear(84),
                   Spec(LayerType::kRelu),
                   Linear(10)};
  return config;
}

}  // namespace testing
}  // namespace pstrain
