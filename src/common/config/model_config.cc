#include "src/common/config/model_config.h"

#include <string>

namespace pstrain {

const char* LayerTypeName(LayerType type) {
  switch (type) {
    case LayerType::kLinear:
      return "linear";
    case LayerType::kConv2d:
      return "conv2d";
    case LayerType::kMaxpool:
      return "maxpool";
    case LayerType::kAvgpool:
      return "avgpool";
    case LayerType::kRelu:
      return "relu";
    case LayerType::kSigmoid:
      return "sigmoid";
    case LayerType::kTanh:
      return "tanh";
    case LayerType::kDropout:
      return "dropout";
    case LayerType::kFlatten:
      return "flatten";
    case LayerType::kConcat:
      return "concat";
    case LayerType::kEmbeddingBag:
      return "embedding_bag";
    case LayerType::kGelu:
      return "gelu";
    case LayerType::kLayerNorm:
      return "layer_norm";
    case LayerType::kResidual:
      return "residual";
    case LayerType::kAugment:
      return "augment";
    case LayerType::kBatchNorm:
      return "batch_norm";
  }
  return "unknown";
}

const char* LossTypeName(LossType loss) {
  switch (loss) {
    case LossType::kSoftmaxCrossEntropy:
      return "softmax_cross_entropy";
    case LossType::kBceWithLogits:
      return "bce_with_logits";
    case LossType::kMse:
      return "mse";
  }
  return "unknown";
}

const char* DeviceName(Device device) {
  switch (device) {
    case Device::kCpu:
      return "cpu";
    case Device::kGpu:
      return "gpu";
  }
  return "unknown";
}

const char* DataFormatName(DataFormat format) {
  switch (format) {
    case DataFormat::kIdx:
      return "idx";
    case DataFormat::kCriteo:
      return "criteo";
    case DataFormat::kCsv:
      return "csv";
    case DataFormat::kLibsvm:
      return "libsvm";
  }
  return "unknown";
}

bool HasValidation(const DataConfig& data) {
  return !data.validation.empty() || data.validation_fraction > 0;
}

const std::vector<std::string>& ValidationFiles(const DataConfig& data) {
  return data.validation_fraction > 0 ? data.train : data.validation;
}

std::string DefaultLayerName(const std::string& tower, LayerType type, size_t index) {
  return (tower.empty() ? "" : tower + "_") + LayerTypeName(type) + std::to_string(index);
}

std::string SubLayerName(const LayerConfig& layer, size_t index) {
  return layer.name.empty() ? DefaultLayerName("", layer.type, index) : layer.name;
}

}  // namespace pstrain
