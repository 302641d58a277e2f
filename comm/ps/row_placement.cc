#include "comm/ps/row_placement.h"

namespace pstrain {

void GroupByServer(const std::vector<int64_t>& unique, int servers, ServerGroups* out) {
  assert(servers > 0);
  // Counting sort by server: count, prefix-sum, place.
  std::vector<size_t>& offsets = out->offsets;
  offsets.assign(static_cast<size_t>(servers) + 1, 0);
  for (int64_t id : unique) ++offsets[ServerOfId(id, servers) + 1];
  for (int s = 0; s < servers; ++s) offsets[s + 1] += offsets[s];
  out->ids.resize(unique.size());
  out->unique_index.resize(unique.size());
  std::vector<size_t> next(offsets.begin(), offsets.end() - 1);
  for (size_t u = 0; u < unique.size(); ++u) {
    const size_t k = next[ServerOfId(unique[u], servers)]++;
    out->ids[k] = unique[u];
    out->unique_index[k] = static_cast<uint32_t>(u);
  }
}

}  // namespace pstrain
