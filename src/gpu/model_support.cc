// Which models the GPU path runs: decided from the config alone, so that
// both builds (and a machine without a device) give the same answer.
#include <string>

#include "src/gpu/gpu.h"

namespace pstrain {
namespace {

bool RunsOnGpu(LayerType type) {
  switch (type) {
    case LayerType::kLinear:
    case LayerType::kConv2d:
    case LayerType::kMaxpool:
    case LayerType::kAvgpool:
    case LayerType::kRelu:
    case LayerType::kSigmoid:
    case LayerType::kTanh:
    case LayerType::kFlatten:
    case LayerType::kDropout:
      return true;
    case LayerType::kConcat:
    case LayerType::kEmbeddingBag:
      return false;
  }
  return false;
}

}  // namespace

Status CheckGpuModelSupported(const ModelConfig& config) {
  if (!config.wide.empty() || !config.deep.empty()) {
    const int line = !config.wide.empty() ? config.wide[0].line : config.deep[0].line;
    return InvalidArgument("model.wide/deep (line " + std::to_string(line) +
                           "): wide and deep towers are not supported on the GPU");
  }
  for (size_t i = 0; i < config.layers.size(); ++i) {
    const LayerConfig& c = config.layers[i];
    if (RunsOnGpu(c.type)) continue;
    return InvalidArgument("model.layers[" + std::to_string(i) + "] (" + LayerTypeName(c.type) +
                           ", line " + std::to_string(c.line) + "): not supported on the GPU");
  }
  return Status::OK();
}

}  // namespace pstrain
