// LoadedBackend: the candidate paths of module_loader.h, dlopen and the
// entry point. In a build without CUDA there is no module, and every call
// says so.
#include "src/gpu/module_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

namespace pstrain::gpu {
namespace {

#ifdef PSTRAIN_GPU_MODULE_FILE

// The folder of the running executable ("" when /proc is not mounted).
std::string ExecutableFolder() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "";
  const std::string exe(path, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

// The paths to try, in order; `forced`: PSTRAIN_GPU_MODULE named the only one.
std::vector<std::string> Candidates(bool* forced) {
  // Read here, once, like CUDA_VISIBLE_DEVICES: it only says where the
  // module lies, and a test can point it at a file of its own.
  const char* named = std::getenv("PSTRAIN_GPU_MODULE");
  *forced = named != nullptr && named[0] != '\0';
  if (*forced) return {named};
  std::vector<std::string> paths;
  const std::string folder = ExecutableFolder();
  if (!folder.empty()) {
    paths.push_back(folder + "/" PSTRAIN_GPU_MODULE_FILE);
    paths.push_back(folder + "/" PSTRAIN_GPU_MODULE_FROM_BIN "/" PSTRAIN_GPU_MODULE_FILE);
  }
  paths.push_back(PSTRAIN_GPU_MODULE_BUILD_DIR "/" PSTRAIN_GPU_MODULE_FILE);
  return paths;
}

Status NotLoaded(const std::string& why) {
  return FailedPrecondition("model.device: gpu, but the GPU module could not be loaded: " + why);
}

StatusOr<const Backend*> Load() {
  bool forced = false;
  const std::vector<std::string> paths = Candidates(&forced);
  for (const std::string& candidate : paths) {
    if (access(candidate.c_str(), F_OK) != 0) continue;
    // "bin/../lib/pstrain/..." as the plain path, for messages and logs.
    char* real = realpath(candidate.c_str(), nullptr);
    const std::string path = real != nullptr ? real : candidate;
    std::free(real);
    // RTLD_LOCAL: the module's copies of pstrain's code stay its own.
    void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (module == nullptr) {
      // dlerror names the file it could not open: the module, or a library
      // it needs ("libcudart.so.13: cannot open shared object file").
      const std::string error = dlerror();
      return NotLoaded(error.find(path) == std::string::npos ? path + ": " + error : error);
    }
    auto entry = reinterpret_cast<PstrainGpuBackendFn>(dlsym(module, PSTRAIN_GPU_ENTRY_POINT));
    if (entry == nullptr) return NotLoaded(path + ": " + dlerror());
    const std::string key = BuildKey();
    const char* module_key = "";
    const Backend* backend = entry(key.c_str(), &module_key);
    if (backend == nullptr) {
      return NotLoaded(path + " was built for another pstrain (" + module_key + "; this is " + key +
                       ")");
    }
    return backend;
  }
  if (forced) return NotLoaded("no file at PSTRAIN_GPU_MODULE=" + paths[0]);
  std::string tried;
  for (const std::string& path : paths) tried += (tried.empty() ? "" : ", ") + path;
  return NotLoaded("no " PSTRAIN_GPU_MODULE_FILE " at " + tried +
                   " (PSTRAIN_GPU_MODULE can name the file)");
}

#else

StatusOr<const Backend*> Load() {
  return FailedPrecondition(
      "model.device: gpu, but this pstrain was built without CUDA (nvcc not found at build time, "
      "or PSTRAIN_ENABLE_CUDA=OFF)");
}

#endif

}  // namespace

StatusOr<const Backend*> LoadedBackend() {
  static const StatusOr<const Backend*> loaded = Load();
  return loaded;
}

}  // namespace pstrain::gpu
