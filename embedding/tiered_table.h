// TieredTable: one server's share of one embedding table with a memory
// budget: at most `budget_rows` rows (values and optimizer state) in memory,
// in a SparseTable, and the rest in a RowStore on local disk. A row moved to
// disk and touched again comes back with exactly its values, slots, update
// count and last-touched step, so the table computes what an all-in-memory
// SparseTable without max_rows would, bit for bit.
//
// Per Lookup or ApplyGradients batch:
//   1. every id is checked (a bad one fails the batch, changing nothing);
//   2. the batch's ids are deduplicated and split into those in memory and
//      the others, which are read from disk in ONE batched read (MultiGet);
//   3. if memory would pass the budget, the least recently touched rows
//      that are not the batch's are spilled in ONE write batch, which also
//      erases the disk copies of the rows read in 2;
//   4. the rows read come into memory, and the in-memory operation runs
//      (touching, updating, admitting and creating rows as SparseTable does).
// A failed read or write fails the batch and changes nothing, the clock
// included: spilled rows stay in memory, rows read stay on disk; the error
// names the store, the table and what failed (no space left on the device).
//
// Memory: the budget is exceeded only by the rows of one batch (when a
// batch's unique ids are more than the budget) until the next batch spills.
// Eviction is least-recently-touched (the table's RecencyList): on Zipf
// draws it hits as often as a frequency-aware policy (README, "Tiered
// embedding tables").
//
// Since rows spill from the back of the recency list, every row on disk was
// touched no later than every row in memory. evict_after_steps and max_rows
// keep their meaning over both tiers: rows dropped by them are gone from
// memory and disk alike (the disk ones found through the store's recency
// index, oldest first).
//
// Checkpoints: RowStore::Checkpoint (once for all of a server's tables) and
// Serialize of every table, with no batch in between; Restore the store and
// Deserialize each table to resume.
//
// Thread-safety: none, as SparseTable. The store must outlive the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "embedding/id_dedup.h"
#include "embedding/id_map.h"
#include "embedding/row_batch.h"
#include "embedding/row_store.h"
#include "embedding/sparse_table.h"

namespace pstrain {

// Where a tiered table's rows are and how they moved.
struct TieredTableCounters {
  int64_t resident = 0;  // rows in memory
  int64_t on_disk = 0;   // rows in the store
  int64_t spilled = 0;   // rows written to disk to make room
  int64_t fetched = 0;   // rows read back from disk
};

class TieredTable {
 public:
  // An empty table over `store` (a new table there). InvalidArgument when
  // options do not Validate() or budget_rows < 1.
  static StatusOr<TieredTable> Create(const EmbeddingTableOptions& options, int64_t budget_rows,
                                      RowStore* store);
  // The rows a budget of `bytes` holds: the row with its optimizer slots,
  // metadata and index entry (at least 1).
  static int64_t RowsForBytes(const EmbeddingTableOptions& options, int64_t bytes);

  TieredTable(TieredTable&&) = default;
  TieredTable& operator=(TieredTable&&) = delete;

  // As SparseTable::Lookup and ApplyGradients, with the rows on disk read
  // back first; see the top of this file for what a failure leaves.
  Status Lookup(const int64_t* ids, size_t n, float* out, int64_t step);
  Status ApplyGradients(const int64_t* ids, const float* grads, size_t n, int64_t step);

  // As SparseTable::EvictUntouched, over memory and disk.
  StatusOr<int64_t> EvictUntouched(int64_t step);

  // A copy of id's row wherever it is; nullopt when it has none. Touches
  // nothing.
  struct Row {
    std::vector<float> values;  // dim
    std::vector<float> slots;   // num_slots * dim
    int64_t last_touched = 0;
    int64_t updates = 0;
  };
  StatusOr<std::optional<Row>> Find(int64_t id) const;

  // Calls fn for every row, in id order, from memory and disk, in memory
  // bounded by 8 bytes per resident row (for export). Stops at the first
  // error, fn's or the store's.
  Status ForEachRow(const std::function<Status(int64_t id, const SparseTable::RowView&)>& fn) const;

  Status CheckId(int64_t id) const { return memory_.CheckId(id); }
  const EmbeddingTableOptions& options() const { return options_; }
  const SparseOptimizer& optimizer() const { return memory_.optimizer(); }
  int64_t budget_rows() const { return budget_rows_; }
  int64_t table_updates() const { return memory_.table_updates(); }
  // As SparseTable's, with rows counting both tiers and evictions counting
  // the rows dropped (never the rows spilled to disk).
  EmbeddingTableCounters counters() const;
  TieredTableCounters tier_counters() const;

  // The table's state besides the rows on disk (those are in the store's
  // checkpoint): the rows in memory, the clock, the sightings, the count of
  // rows on disk. Format in tiered_table_io.cc.
  void Serialize(std::string* out) const;
  // The table `data` holds over `store`, restored from the checkpoint taken
  // with it. Damaged bytes, or a store that lacks the table while the bytes
  // say rows are on disk, give an error naming the table.
  static StatusOr<TieredTable> Deserialize(const EmbeddingTableOptions& options,
                                           int64_t budget_rows, RowStore* store, const void* data,
                                           size_t size);

 private:
  TieredTable(const EmbeddingTableOptions& options, int64_t budget_rows, RowStore* store,
              RowStore::TableId table, SparseTable memory);
  // The options of the in-memory part: no max_rows (this class keeps it).
  static EmbeddingTableOptions MemoryOptions(const EmbeddingTableOptions& options);
  static bool NeedsRecency(const EmbeddingTableOptions& options);

  // Steps 1 to 3 of the top of this file, and the moves of 4. `creates`:
  // the operation may create a row for every id it does not find (Lookup).
  Status BringIn(const int64_t* ids, size_t n, bool creates);
  // Drops the least recently touched rows past max_rows.
  Status DropPastMaxRows();

  EmbeddingTableOptions options_;
  int64_t budget_rows_;
  RowStore* store_;  // not owned; outlives the table
  RowStore::TableId table_;
  SparseTable memory_;
  int64_t disk_rows_ = 0;
  int64_t dropped_ = 0;           // rows dropped besides memory_'s own evictions
  int64_t capacity_dropped_ = 0;  // of those, for max_rows
  TieredTableCounters moved_;     // spilled and fetched
  // Buffers kept between batches, so a steady batch allocates nothing.
  IdDedup dedup_;
  FlatIdMap<bool> in_batch_;  // the batch's ids that are in memory
  std::vector<int64_t> missing_;
  RowBatch fetched_, spilled_;
  std::vector<RowStore::Erasure> erase_;
};

}  // namespace pstrain
