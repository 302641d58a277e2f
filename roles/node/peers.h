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

#include <vector>

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

}  // namespace pstrain
