// IdGroups: a batch's ids deduplicated and renumbered per set of id slots
// that the server-held tables read. Tables that read the same slots (every
// slot, unless data.columns name their tables) share one numbering; each
// table's rows for a batch are its group's unique ids, rows 0..U-1 of its
// Param. A slot belongs to one group, so two tables that read some of the
// same slots but not all are refused: the slot could not hold two numbers.
//
// Keeps its buffers between batches. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "embedding/id_dedup.h"
#include "roles/placement/server_tables.h"
#include "src/common/status.h"

namespace pstrain {

class IdGroups {
 public:
  // `table_slots[t]`: the slots table t reads of a sample's `fields` (empty:
  // all). Errors name the two tables by index when their slots overlap in
  // part (the caller says which tables those are).
  static StatusOr<IdGroups> Make(const std::vector<std::vector<int>>& table_slots, int fields);
  // Make over `tables`' slots, in their order.
  static StatusOr<IdGroups> ForTables(const std::vector<ServerTable>& tables, int fields);

  // Two tables (by index, a < b) that share `slot` but not all their slots:
  // what Make refuses. Nothing when every two read the same slots or none
  // in common.
  struct SlotConflict {
    size_t a, b;
    int slot;
  };
  static std::optional<SlotConflict> Conflict(const std::vector<std::vector<int>>& table_slots,
                                              int fields);
  static std::optional<SlotConflict> ConflictIn(const std::vector<ServerTable>& tables, int fields);

  // Deduplicates each group's ids of `ids` (a batch, samples x fields) and,
  // with `renumber`, writes each id's place among its group's unique ids
  // over it.
  void Reset(int64_t* ids, size_t n, bool renumber);
  // Table t's unique ids in order of first appearance: its rows.
  const std::vector<int64_t>& unique(size_t table) const {
    return groups_[group_of_[table]].dedup.unique();
  }

 private:
  struct Group {
    std::vector<int> slots;  // ascending; all `fields` of them: the whole batch
    IdDedup dedup;
    std::vector<int64_t> ids;  // scratch: the group's slots of a batch
  };
  int fields_ = 0;
  std::vector<Group> groups_;
  std::vector<size_t> group_of_;  // by table
};

}  // namespace pstrain
