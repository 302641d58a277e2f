// Which models the GPU path runs: decided from the config alone, so that
// both builds (and a machine without a device) give the same answer.
#include <string>
#include <utility>
#include <vector>

#include "src/common/config/model_config.h"
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
    case LayerType::kConcat:
    case LayerType::kEmbeddingBag:
      return true;
    case LayerType::kGelu:
    case LayerType::kLayerNorm:
    case LayerType::kResidual:
    case LayerType::kAugment:
    case LayerType::kBatchNorm:
      return false;
  }
  return false;
}

}  // namespace

Status CheckGpuModelSupported(const ModelConfig& config) {
  if (config.loss == LossType::kMse)
    return InvalidArgument("model.loss mse: not supported on the GPU");
  const std::pair<const char*, const std::vector<LayerConfig>*> lists[] = {
      {"layers", &config.layers}, {"wide", &config.wide}, {"deep", &config.deep}};
  for (const auto& [list, layers] : lists) {
    for (size_t i = 0; i < layers->size(); ++i) {
      const LayerConfig& c = (*layers)[i];
      if (!c.slots.empty())
        return InvalidArgument("model." + std::string(list) + "[" + std::to_string(i) +
                               "] (embedding_bag, line " + std::to_string(c.line) +
                               "): reading only the columns that name it (table:) is not "
                               "supported on the GPU");
      if (RunsOnGpu(c.type)) continue;
      return InvalidArgument("model." + std::string(list) + "[" + std::to_string(i) + "] (" +
                             LayerTypeName(c.type) + ", line " + std::to_string(c.line) +
                             "): not supported on the GPU");
    }
  }
  return Status::OK();
}

}  // namespace pstrain
