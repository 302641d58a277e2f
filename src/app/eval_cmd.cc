// pstrain eval: the test metric of a checkpoint's model, without training
// (roles/offline/eval.h).
#include <cstdio>

#include "roles/offline/eval.h"
#include "src/app/commands.h"
#include "src/common/config/config.h"

namespace pstrain {

int RunEval(const EvalOptions& options) {
  if (options.config_path.empty() || options.checkpoint_dir.empty()) {
    std::fputs("pstrain eval: needs --config FILE and --checkpoint DIR\n", stderr);
    return 2;
  }
  auto config = LoadConfig(options.config_path, options.config_overrides);
  if (!config.ok()) {
    std::fprintf(stderr, "pstrain eval: %s\n", config.status().message().c_str());
    return 2;
  }
  auto metric = EvaluateCheckpoint(*config, options.checkpoint_dir);
  if (!metric.ok()) {
    std::fprintf(stderr, "pstrain eval: %s\n", metric.status().message().c_str());
    return 1;
  }
  std::printf("checkpoint step %lld: %s\n", static_cast<long long>(metric->step),
              metric->description.c_str());
  return 0;
}

}  // namespace pstrain
