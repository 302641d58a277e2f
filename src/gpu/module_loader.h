// Internal to src/gpu: finds and opens the CUDA module (backend.h) once per
// process, on the first call that needs a device.
//
// Where it looks, in order (the first file that exists is the one opened):
//   $PSTRAIN_GPU_MODULE                   when set, the only place
//   <the executable's folder>/libpstrain_cuda.so
//   <the executable's folder>/../lib/pstrain/libpstrain_cuda.so   (cmake --install)
//   the build tree's src/gpu/             (test binaries, a pstrain not installed)
// Thread-safe; the module is never closed (CUDA does not survive dlclose).
#pragma once

#include "src/common/status.h"
#include "src/gpu/backend.h"

namespace pstrain::gpu {

// The module's Backend, or FailedPrecondition in the words CheckGpuVisible()
// uses: "model.device: gpu, but this pstrain was built without CUDA (...)"
// or "... but the GPU module could not be loaded: <path>: <dlerror>". The
// answer of the first call is kept.
StatusOr<const Backend*> LoadedBackend();

}  // namespace pstrain::gpu
