// RunRecovering: a server's or worker's process across rollbacks.
//
// When the scheduler pauses the job (a node was lost, roles/scheduler/scheduler.h),
// every node drops all it holds by destroying its role object, the only way
// to be sure no thread, connection or buffer of the old run survives, and
// builds it anew with the same node id and rank; the new one registers,
// waits for the job to resume and restores the newest complete checkpoint.
// torchrun's elastic agent restarts its workers for the same reason.
// Only what describes the job, not this run's state, goes from one run to
// the next (NodeMemory): the topology, which the scheduler then sends only
// the changes of, and the port, which the node listens on again.
#pragma once

#include <functional>

#include "roles/node/node.h"
#include "src/common/config/config.h"
#include "src/common/config/options.h"
#include "src/common/logging.h"

namespace pstrain {

// How one run of a role ended.
struct Incarnation {
  Status status;
  bool paused = false;  // the scheduler paused the job: run again
  int rank = -1;        // the rank it held (kept by the next run)
  NodeMemory kept;      // given to the next run
};
// One run, given what the run before it kept (nothing for the first).
using RunIncarnation =
    std::function<Incarnation(const NodeOptions&, const Config&, NodeMemory recalled)>;

// Runs `run` until it ends other than paused, at most kMaxRollbacks + 1
// times (changes of an elastic job's shape, which redo nothing, are not
// counted); every run after the first resumes from the newest checkpoint.
Status RunRecovering(NodeOptions options, Config config, const Logger& log,
                     const RunIncarnation& run);

inline constexpr int kMaxRollbacks = 1000;

}  // namespace pstrain
