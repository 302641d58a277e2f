// BuildKey (backend.h): compiled into both the front and the CUDA module, so
// that each side states the layout it was built with.
#include <build_info.h>

#include <string>

#include "src/common/batch.h"
#include "src/common/config/model_config.h"
#include "src/gpu/backend.h"
#include "src/nn/layer.h"

namespace pstrain::gpu {

std::string BuildKey() {
  const size_t sizes[] = {sizeof(Status),      sizeof(std::string), sizeof(ModelConfig),
                          sizeof(LayerConfig), sizeof(Batch),       sizeof(Tensor),
                          sizeof(Param)};
  std::string key = std::string("pstrain ") + PSTRAIN_VERSION + ", gpu interface " +
                    std::to_string(kBackendVersion) + ", sizes";
  for (size_t size : sizes) key += " " + std::to_string(size);
  return key;
}

}  // namespace pstrain::gpu
