#include "roles/node/recovery.h"

#include <fmt/format.h>

namespace pstrain {

Status RunRecovering(NodeOptions options, Config config, const Logger& log,
                     const RunIncarnation& run) {
  NodeMemory kept;
  for (int rollbacks = 0;;) {
    Incarnation ended = run(options, config, std::move(kept));
    kept = std::move(ended.kept);
    if (!ended.paused) return ended.status;
    options.cluster.test_fault = TestFault{};  // a test's fault fires once
    // A server of a replicated job that was counted lost while it stalled:
    // its heir holds what it held, and it joins again as a backup
    // (roles/scheduler/promotion.cc), with nothing to restore.
    if (!config.train.checkpoint && options.role == Role::kServer &&
        config.train.replication.replicas > 0) {
      if (rollbacks == kMaxRollbacks)
        return Aborted(fmt::format("the job was paused {} times; giving up", rollbacks + 1));
      ++rollbacks;
      if (ended.rank >= 0) options.requested_rank = ended.rank;
      log->warn("this server was counted lost: it starts again as rank {} and joins as a backup",
                ended.rank);
      continue;
    }
    if (!config.train.checkpoint)
      return Aborted("the job was paused, and without train.checkpoint it cannot go on");
    config.train.checkpoint->resume = true;
    if (kept.worker_num > 0) {
      // An elastic job changed shape: nothing is redone, so this is no rollback.
      options.requested_rank = kept.rank;
      options.cluster.server_num = kept.server_num;
      options.cluster.worker_num = kept.worker_num;
      log->info("this {} starts again as rank {} of {} servers and {} workers",
                RoleName(options.role), kept.rank, kept.server_num, kept.worker_num);
      continue;
    }
    if (rollbacks == kMaxRollbacks)
      return Aborted(fmt::format("the job was paused {} times; giving up", rollbacks + 1));
    ++rollbacks;
    if (ended.rank >= 0) options.requested_rank = ended.rank;
    log->warn(
        "rolling back: this {} starts again as rank {} and resumes from the newest "
        "complete checkpoint in {}",
        RoleName(options.role), ended.rank, config.train.checkpoint->dir);
  }
}

}  // namespace pstrain
