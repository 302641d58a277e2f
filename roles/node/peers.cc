#include "roles/node/peers.h"

#include <fmt/format.h>

#include <map>

#include "src/common/fnv.h"

namespace pstrain {

std::vector<PeerRank> PeersOf(Role role, int rank, int servers, int workers, int replicas) {
  std::vector<PeerRank> peers;
  if (role == Role::kServer && replicas > 0)
    for (int s = 0; s < servers; ++s)
      if (s != rank) peers.push_back({Role::kServer, s});
  if (role != Role::kWorker) return peers;
  peers.reserve(static_cast<size_t>(servers) + 2);
  for (int s = 0; s < servers; ++s) peers.push_back({Role::kServer, s});
  const int next = (rank + 1) % workers, prev = (rank + workers - 1) % workers;
  if (next != rank) peers.push_back({Role::kWorker, next});
  if (prev != rank && prev != next) peers.push_back({Role::kWorker, prev});
  return peers;
}

std::string StaleHello(const Hello& hello, int64_t generation) {
  if (hello.generation == generation) return "";
  return fmt::format(
      "{} rank {} (node id {}) registered for generation {}, this node for generation {}: it was "
      "replaced, or the job went on without it",
      RoleName(hello.node.role), hello.node.rank, hello.node.node_id, hello.generation, generation);
}

// Everything later finds its peers in the topology by rank and relies on
// each being there once: a delta is held to the same rule, less the count.
Status CheckTopology(const Topology& t, Role role, int rank, int servers, int workers,
                     int replicas) {
  if (t.server_num != servers || t.worker_num != workers)
    return InvalidArgument(
        fmt::format("topology for a job of {} servers and {} workers, this node's has {} and {}",
                    t.server_num, t.worker_num, servers, workers));
  const std::vector<PeerRank> peers = PeersOf(role, rank, servers, workers, replicas);
  std::map<std::pair<Role, int>, int> seen;  // peer -> times listed
  for (const PeerRank& p : peers) seen[{p.role, p.rank}] = 0;
  for (const NodeInfo& n : t.nodes) {
    auto it = seen.find({n.role, n.rank});
    if (it == seen.end() || it->second++ > 0)
      return InvalidArgument(fmt::format("topology lists {} rank {} wrongly for {} rank {}",
                                         RoleName(n.role), n.rank, RoleName(role), rank));
  }
  if (!t.delta() && t.nodes.size() != peers.size())
    return InvalidArgument(fmt::format("topology lists {} nodes, {} rank {} talks to {}",
                                       t.nodes.size(), RoleName(role), rank, peers.size()));
  return Status::OK();
}

uint64_t TopologyDigest(const std::vector<NodeInfo>& nodes, int64_t generation, int server_num,
                        int worker_num) {
  uint64_t sum = Mix(static_cast<uint64_t>(generation) ^ nodes.size()) +
                 Mix((static_cast<uint64_t>(server_num) << 32) ^ static_cast<uint32_t>(worker_num));
  for (const NodeInfo& n : nodes) {
    uint64_t h = kFnvOffset;
    const int32_t fields[] = {static_cast<int32_t>(n.role), n.rank, n.port,
                              static_cast<int32_t>(n.node_id.size())};
    h = Fnv(h, fields, sizeof fields);
    h = Fnv(h, n.node_id.data(), n.node_id.size());
    h = Fnv(h, n.host.data(), n.host.size());
    sum += Mix(h);
  }
  return sum;
}

StatusOr<Topology> ApplyTopology(const Topology* held, const Topology& received, Role role,
                                 int rank, int servers, int workers, int replicas) {
  PSTRAIN_RETURN_IF_ERROR(CheckTopology(received, role, rank, servers, workers, replicas));
  if (!received.delta()) return received;
  if (held == nullptr)
    return FailedPrecondition(
        fmt::format("a topology delta from generation {}, and this node holds no topology",
                    received.base_generation));
  if (held->generation != received.base_generation)
    return FailedPrecondition(
        fmt::format("a topology delta from generation {}, and this node holds generation {}",
                    received.base_generation, held->generation));
  // What this node holds is whole and was checked when it came, but for
  // this rank and shape? (A node's rank and shape do not change; say so if
  // they did rather than patch another node's list.)
  if (Status st = CheckTopology(*held, role, rank, servers, workers, replicas); !st.ok())
    return FailedPrecondition("the topology this node holds does not fit: " + st.message());
  Topology patched = *held;
  patched.generation = received.generation;
  std::map<std::pair<Role, int>, size_t> at;  // peer -> index in patched.nodes
  for (size_t i = 0; i < patched.nodes.size(); ++i)
    at[{patched.nodes[i].role, patched.nodes[i].rank}] = i;
  for (const NodeInfo& n : received.nodes) patched.nodes[at.at({n.role, n.rank})] = n;
  return patched;
}

}  // namespace pstrain
