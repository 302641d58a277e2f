#include "roles/node/server_view.h"

#include <algorithm>

namespace pstrain {

std::vector<int> BackupsOf(int primary, const std::vector<int>& live, int replicas) {
  std::vector<int> backups;
  // The live ranks after `primary`, then those before it.
  auto after = std::upper_bound(live.begin(), live.end(), primary);
  for (size_t i = 0; i < live.size() && static_cast<int>(backups.size()) < replicas; ++i) {
    if (after == live.end()) after = live.begin();
    if (*after != primary) backups.push_back(*after);
    ++after;
  }
  return backups;
}

std::vector<int> PrimariesBackedUpBy(int rank, const std::vector<int>& live, int replicas) {
  std::vector<int> primaries;
  for (int p : live) {
    const std::vector<int> backups = BackupsOf(p, live, replicas);
    if (std::find(backups.begin(), backups.end(), rank) != backups.end()) primaries.push_back(p);
  }
  return primaries;
}

std::vector<int> AllServers(int servers) {
  std::vector<int> all;
  for (int r = 0; r < servers; ++r) all.push_back(r);
  return all;
}

int HeirOf(int lost, const std::vector<int>& live) {
  const std::vector<int> first = BackupsOf(lost, live, 1);
  return first.empty() ? -1 : first.front();
}

}  // namespace pstrain
