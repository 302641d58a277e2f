// Who a node of a job talks to, and so which nodes its Topology lists
// (roles/scheduler/scheduler.h, step 3): the one rule the scheduler builds
// each node's Topology by and the node checks it against.
//   worker r: every server (it pushes, pulls and asks for checkpoints), and
//             its ring neighbours, workers r+1 (it dials it) and r-1 (which
//             dials it), for the all-reduce of `ps: false` weights;
//   server:   no one: workers dial it and introduce themselves; with
//             train.replication, every other server too (it dials those
//             that back its partitions up, roles/server/replication.h).
// What every worker must share beyond this (worker 0's model fingerprint, a
// GPU communicator's id) travels through the scheduler's barriers, so a
// job's Topology bytes grow with workers x servers, not with the square of
// its nodes.
//
// After a rollback or a rejoin a node gets a delta instead (Topology's
// base_generation): only the peers whose entry changed since the topology
// it acknowledged last, which it patches its own copy with (ApplyTopology).
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
// `replicas`: train.replication.replicas.
std::vector<PeerRank> PeersOf(Role role, int rank, int servers, int workers, int replicas = 0);

// Why a peer's Hello may not be taken by a node of `generation`, or "": the
// peer registered for another generation. A node replaced while it was cut
// off (or left behind by a rollback) still holds its old rank, and servers
// and ring peers do not keep every node's id: its generation gives it away.
std::string StaleHello(const Hello& hello, int64_t generation);

// Whether `t` is a Topology for `role` rank `rank` of a job of `servers` and
// `workers`: that shape, only this node's peers, each at most once, and
// every one of them unless `t` is a delta.
Status CheckTopology(const Topology& t, Role role, int rank, int servers, int workers,
                     int replicas = 0);

// A digest of the whole list `nodes` of generation `generation` in a job of
// that shape, the same whatever the order of the entries: how a node tells
// a scheduler that knows nothing of it (a restarted one, or one whose
// elastic job changed shape) which list it holds.
uint64_t TopologyDigest(const std::vector<NodeInfo>& nodes, int64_t generation, int server_num,
                        int worker_num);

// The whole topology this node holds once `received` is applied to `held`
// (nullptr: it holds none). A whole list replaces it; a delta patches it.
// FailedPrecondition: a delta from a topology this node does not hold (none,
// or another generation); the scheduler then sends the whole list.
// InvalidArgument: `received` is wrong (CheckTopology).
StatusOr<Topology> ApplyTopology(const Topology* held, const Topology& received, Role role,
                                 int rank, int servers, int workers, int replicas = 0);

}  // namespace pstrain
