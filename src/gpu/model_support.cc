// Which models the GPU path runs: decided from the config alone, so that
// both builds (and a machine without a device) give the same answer.
#include <set>
#include <string>

#include "src/gpu/gpu.h"

namespace pstrain {

Status CheckGpuModelSupported(const ModelConfig& config) {
  if (!config.wide.empty() || !config.deep.empty()) {
    const int line = !config.wide.empty() ? config.wide[0].line : config.deep[0].line;
    return InvalidArgument("model.wide/deep (line " + std::to_string(line) +
                           "): wide and deep towers are not supported on the GPU");
  }
  static const std::set<std::string> kSupported = {
      "linear", "conv2d", "maxpool", "avgpool", "relu", "sigmoid", "tanh", "flatten", "dropout"};
  for (size_t i = 0; i < config.layers.size(); ++i) {
    const LayerConfig& c = config.layers[i];
    if (kSupported.count(c.type) > 0) continue;
    return InvalidArgument("model.layers[" + std::to_string(i) + "] (" + c.type + ", line " +
                           std::to_string(c.line) + "): not supported on the GPU");
  }
  return Status::OK();
}

}  // namespace pstrain
