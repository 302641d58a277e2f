// An elastic job's servers changing live: the workers' side of scheduler
// step 14 (roles/scheduler/scheduler.h).
//
// The scheduler admits joining servers at once (or marks the leaving ones,
// always the highest ranks) and holds every worker at the next step
// boundary every worker reaches, S. There, before step S:
//   1. joining: every worker connects to the new servers (from the
//      topology);
//   2. a barrier of the workers: every one is connected and none is past S,
//      so no pull waits on a partition and no push of S has gone out;
//   3. the chief moves each partition whose server differs in the placement
//      of the new count (comm/ps/partition_map.h, the one a checkpoint of
//      that count resumes with) from its server to the new one, live, with
//      its optimizer state and clocks (roles/server/handoff.h);
//   4. a barrier again, then every worker routes by the new placement;
//      leaving: every worker closes its connections to the leavers;
//   5. the chief tells the scheduler (ShapeChanged), which then lets the
//      leavers go, and training goes on at step S: no step is redone and no
//      update lost or applied twice.
// Jobs with server-held embedding tables do not change this way: their rows
// move through a checkpoint of S (roles/scheduler/elastic.cc).
#pragma once

#include <cstdint>

#include "roles/worker/job.h"
#include "src/common/status.h"

namespace pstrain {

// Before step `step`: the job runs on with `servers` servers.
Status ChangeServers(WorkerContext& ctx, int64_t step, int servers);

}  // namespace pstrain
