#include "roles/placement/id_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace pstrain {

StatusOr<IdGroups> IdGroups::Make(const std::vector<std::vector<int>>& table_slots, int fields) {
  IdGroups out;
  out.fields_ = std::max(1, fields);
  for (size_t t = 0; t < table_slots.size(); ++t) {
    std::vector<int> slots = table_slots[t];
    if (slots.empty()) {
      slots.resize(static_cast<size_t>(out.fields_));
      std::iota(slots.begin(), slots.end(), 0);
    }
    std::sort(slots.begin(), slots.end());
    size_t group = out.groups_.size();
    for (size_t g = 0; g < out.groups_.size(); ++g) {
      const std::vector<int>& other = out.groups_[g].slots;
      if (other == slots) {
        group = g;
        break;
      }
      std::vector<int> shared;
      std::set_intersection(other.begin(), other.end(), slots.begin(), slots.end(),
                            std::back_inserter(shared));
      if (!shared.empty()) {
        size_t first = 0;
        while (out.group_of_[first] != g) ++first;
        return InvalidArgument(fmt::format(
            "tables {} and {} read some of the same id slots (slot {}) but not all: tables on "
            "the servers read the same columns or none in common",
            first, t, shared[0]));
      }
    }
    if (group == out.groups_.size()) out.groups_.emplace_back().slots = std::move(slots);
    out.group_of_.push_back(group);
  }
  return out;
}

StatusOr<IdGroups> IdGroups::ForTables(const std::vector<ServerTable>& tables, int fields) {
  std::vector<std::vector<int>> slots;
  for (const ServerTable& t : tables) slots.push_back(t.slots);
  return Make(slots, fields);
}

void IdGroups::Reset(int64_t* ids, size_t n, bool renumber) {
  const size_t fields = static_cast<size_t>(fields_);
  for (Group& g : groups_) {
    if (g.slots.size() == fields) {  // the whole batch, in place
      g.dedup.Reset(ids, n);
      if (renumber)
        for (size_t i = 0; i < n; ++i) ids[i] = g.dedup.inverse()[i];
      continue;
    }
    g.ids.clear();
    for (size_t at = 0; at + fields <= n; at += fields)
      for (int slot : g.slots) g.ids.push_back(ids[at + static_cast<size_t>(slot)]);
    g.dedup.Reset(g.ids.data(), g.ids.size());
    if (!renumber) continue;
    size_t k = 0;
    for (size_t at = 0; at + fields <= n; at += fields)
      for (int slot : g.slots) ids[at + static_cast<size_t>(slot)] = g.dedup.inverse()[k++];
  }
}

}  // namespace pstrain
