#include "roles/node/peers.h"

#include <fmt/format.h>

namespace pstrain {

std::vector<PeerRank> PeersOf(Role role, int rank, int servers, int workers) {
  std::vector<PeerRank> peers;
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

}  // namespace pstrain
