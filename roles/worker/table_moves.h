// The chief's side of moving embedding-table rows live, when an elastic
// job's servers change (roles/worker/grow.h); the protocol and what each
// server does: roles/server/table_moves.h.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/transport/connection.h"
#include "comm/transport/messages.h"
#include "src/common/logging.h"
#include "src/common/status.h"

namespace pstrain {

class EventLoop;  // comm/transport/event_loop.h

struct RowMoves {
  int64_t rows = 0;   // rows that changed servers
  int64_t bytes = 0;  // their bytes on the wire, values and optimizer state
};

// From `from` servers to `to` (more or fewer), before step `step`:
// `servers` holds the connections to today's ranks 0 .. max(from, to) - 1.
// `slots` (fewer only): for each rank of the new placement, the rank its
// server holds today (empty: ranks below `to` keep theirs); each server
// that stays is told its new rank. With `check` (tests), every server's
// tables are fingerprinted before and after, and a row lost, added or
// changed fails the call naming the table.
// `phase` (roles/server/table_moves.h): kWhole moves every row at the
// change; kCopy, ahead of it while the job trains, copies them to be held
// aside where they go (step is unused, nothing is checked); kDelta, at the
// change after a kCopy of the same placement, moves what changed since.
StatusOr<RowMoves> MoveTableRows(EventLoop* loop, const std::vector<Connection::Ptr>& servers,
                                 int from, int to, const std::vector<int>& slots, int64_t step,
                                 RowsPhase phase, bool check, Logger log);

}  // namespace pstrain
