// Who a node of a job talks to, and so which nodes its Topology lists
// (roles/scheduler/scheduler.h, step 3): the one rule the scheduler builds
// each node's Topology by and the node checks it against.
//   worker r: every server (it pushes, pulls and asks for checkpoints), and
//             its ring neighbours, workers r+1 (it dials it) and r-1 (which
//             dials it), for the all-reduce of `ps: false` weights;
//   server:   no one: workers dial it and introduce themselves.
// What every worker must share beyond this (worker 0's model fingerprint, a
// GPU communicator's id) travels through the scheduler's barriers, so a
// job's Topology bytes grow with workers x servers, not with the square of
// its nodes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/transport/messages.h"
#include "src/common/config/options.h"

namespace pstrain {

struct PeerRank {
  Role role;
  int rank;
  bool operator==(const PeerRank& o) const { return role == o.role && rank == o.rank; }
};

// The peers of `role` rank `rank` in a job of `servers` and `workers`,
// servers first, each once, never the node itself.
std::vector<PeerRank> PeersOf(Role role, int rank, int servers, int workers);

// Why a peer's Hello may not be taken by a node of `generation`, or "": the
// peer registered for another generation. A node replaced while it was cut
// off (or left behind by a rollback) still holds its old rank, and servers
// and ring peers do not keep every node's id: its generation gives it away.
std::string StaleHello(const Hello& hello, int64_t generation);

}  // namespace pstrain
