// The CUDA module's entry point (backend.h), the one symbol it exports.
#include <cstring>
#include <string>
#include <type_traits>

#include "src/gpu/cuda_backend.h"

extern "C" __attribute__((visibility("default"))) const pstrain::gpu::Backend* pstrain_gpu_backend(
    const char* front_key, const char** module_key) {
  static const std::string key = pstrain::gpu::BuildKey();
  static const pstrain::gpu::CudaBackend backend;
  *module_key = key.c_str();
  return std::strcmp(front_key, key.c_str()) == 0 ? &backend : nullptr;
}

static_assert(std::is_same_v<decltype(&pstrain_gpu_backend), PstrainGpuBackendFn>,
              "the front calls the entry point through PstrainGpuBackendFn");
