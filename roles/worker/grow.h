// An elastic job's servers changing live: the workers' side of scheduler
// step 14 (roles/scheduler/scheduler.h).
//
// The scheduler admits joining servers at once (or marks the leaving ones;
// a server above the new count that stays takes a leaver's rank below it,
// Stop's slots) and holds every worker at the next step boundary every
// worker reaches, S. There, before step S:
//   1. joining: every worker connects to the new servers (from the
//      topology);
//   2. a barrier of the workers: every one is connected and none is past S,
//      so no pull waits on a partition and no push of S has gone out;
//   3. the chief moves each partition whose server differs in the placement
//      of the new count (comm/ps/partition_map.h, the one a checkpoint of
//      that count resumes with) from its server to the new one, live, with
//      its optimizer state and clocks (roles/server/handoff.h), and the
//      rows of server-held tables whose server changes (comm/ps/row_placement.h),
//      with theirs (roles/server/table_moves.h);
//   4. a barrier again, then every worker routes by the new placement;
//      leaving: every worker closes its connections to the leavers and
//      orders the others by their new ranks (the chief told each server
//      taking a new rank so, with its rows: roles/server/table_moves.h);
//   5. the chief tells the scheduler (ShapeChanged), which then lets the
//      leavers go, and training goes on at step S: no step is redone and no
//      update lost or applied twice.
// The trainer has finished any pull of rows ahead of time before this, and
// places rows over the new count after it (its SparseClient's UseServers).
#pragma once

#include <cstdint>

#include "roles/worker/job.h"
#include "src/common/status.h"

namespace pstrain {

class SparseClient;      // comm/ps/sparse_client.h
class RemoteEmbeddings;  // roles/worker/remote_embeddings.h

// Before step `step`: the job runs on with `servers` servers; `slots`
// (fewer servers only): for each new rank, the rank its server holds now
// (empty: ranks below `servers` keep theirs). With
// server-held tables, `sparse` and `embeddings` are the trainer's (else
// null): a pull of rows ahead of time ends first, and both place rows over
// the new count after.
Status ChangeServers(WorkerContext& ctx, int64_t step, int servers, const std::vector<int>& slots,
                     SparseClient* sparse, RemoteEmbeddings* embeddings);

}  // namespace pstrain
