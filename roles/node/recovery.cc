#include "roles/node/recovery.h"

#include <fmt/format.h>

namespace pstrain {

Status RunRecovering(NodeOptions options, Config config, const Logger& log,
                     const RunIncarnation& run) {
  NodeMemory kept;
  for (int rollbacks = 0;; ++rollbacks) {
    Incarnation ended = run(options, config, std::move(kept));
    kept = std::move(ended.kept);
    if (!ended.paused) return ended.status;
    if (rollbacks == kMaxRollbacks || !config.train.checkpoint)
      return Aborted(fmt::format("the job was paused {} times; giving up", rollbacks + 1));
    if (ended.rank >= 0) options.requested_rank = ended.rank;
    options.cluster.test_fault = TestFault{};  // a test's fault fires once
    config.train.checkpoint->resume = true;
    log->warn(
        "rolling back: this {} starts again as rank {} and resumes from the newest "
        "complete checkpoint in {}",
        RoleName(options.role), ended.rank, config.train.checkpoint->dir);
  }
}

}  // namespace pstrain
