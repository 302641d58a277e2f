#include "roles/placement/id_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <numeric>

namespace pstrain {

namespace {

// Each table's slots, sorted; empty (all) written out as 0..fields-1.
std::vector<std::vector<int>> SortedSlots(const std::vector<std::vector<int>>& table_slots,
                                          int fields) {
  std::vector<std::vector<int>> out;
  for (std::vector<int> slots : table_slots) {
    if (slots.empty()) {
      slots.resize(static_cast<size_t>(fields));
      std::iota(slots.begin(), slots.end(), 0);
    }
    std::sort(slots.begin(), slots.end());
    out.push_back(std::move(slots));
  }
  return out;
}

std::vector<std::vector<int>> SlotsOf(const std::vector<ServerTable>& tables) {
  std::vector<std::vector<int>> slots;
  for (const ServerTable& t : tables) slots.push_back(t.slots);
  return slots;
}

}  // namespace

std::optional<IdGroups::SlotConflict> IdGroups::Conflict(
    const std::vector<std::vector<int>>& table_slots, int fields) {
  const std::vector<std::vector<int>> sets = SortedSlots(table_slots, std::max(1, fields));
  for (size_t a = 0; a < sets.size(); ++a)
    for (size_t b = a + 1; b < sets.size(); ++b) {
      if (sets[a] == sets[b]) continue;
      std::vector<int> shared;
      std::set_intersection(sets[a].begin(), sets[a].end(), sets[b].begin(), sets[b].end(),
                            std::back_inserter(shared));
      if (!shared.empty()) return SlotConflict{a, b, shared[0]};
    }
  return std::nullopt;
}

std::optional<IdGroups::SlotConflict> IdGroups::ConflictIn(const std::vector<ServerTable>& tables,
                                                           int fields) {
  return Conflict(SlotsOf(tables), fields);
}

StatusOr<IdGroups> IdGroups::Make(const std::vector<std::vector<int>>& table_slots, int fields) {
  if (auto c = Conflict(table_slots, fields))
    return InvalidArgument(fmt::format(
        "tables {} and {} read some of the same id slots (slot {}) but not all: tables on the "
        "servers read the same columns or none in common",
        c->a, c->b, c->slot));
  IdGroups out;
  out.fields_ = std::max(1, fields);
  for (std::vector<int>& slots : SortedSlots(table_slots, out.fields_)) {
    size_t group = 0;
    while (group < out.groups_.size() && out.groups_[group].slots != slots) ++group;
    if (group == out.groups_.size()) out.groups_.emplace_back().slots = std::move(slots);
    out.group_of_.push_back(group);
  }
  return out;
}

StatusOr<IdGroups> IdGroups::ForTables(const std::vector<ServerTable>& tables, int fields) {
  return Make(SlotsOf(tables), fields);
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
