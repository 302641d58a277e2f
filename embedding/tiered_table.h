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
//      the others, which are read from disk in ONE batched read (MultiGet;
//      two halves at once, one on a background thread, when large);
//   3. the rows chosen to leave memory after the previous batch (below) are
//      written in ONE write batch, on the background thread while 4 runs
//      (they are not the batch's rows, so nothing touches them), and leave
//      memory once written;
//   4. the rows read come into memory, and the in-memory operation runs
//      (touching, updating, admitting and creating rows as SparseTable does);
//   5. if memory holds more than the budget, the policy chooses which rows
//      leave at the next batch's write: rows that came in with this batch,
//      or the least recently touched rows that are not the batch's.
// A row read back keeps its disk copy, which its next spill overwrites: no
// erasure per row read (a third of the writes). Not with max_rows or
// evict_after_steps, whose recency index must list only rows on disk alone:
// there, the write of 3 runs before 4, on the caller's thread, and erases
// the disk copies of the rows read.
// A failed read fails the batch and changes nothing, the clock included;
// the error names the store, the table and what failed. A failed write
// (no space left on the device) keeps its rows in memory and to leave; it
// fails the NEXT batch, which changes nothing (the batch it overlapped was
// applied and succeeded: failing it would invite its retry). No row is lost.
//
// Policies (TierPolicy): kLru sends the least recently touched rows out;
// kTinyLfu (the worker's RowCache rule) lets a row that came in stay only if
// its id was asked for more often, recently, than the least recently touched
// row's (FrequencySketch), else the row goes back out. docs/benchmarks.md,
// "Embedding tables", has the figures that chose the default
// (`pstrain bench embedding --cases tiered` measures both).
//
// Memory: budget_rows, plus at most the rows that came in with the last two
// batches (those chosen to leave, until the next batch has written them).
//
// evict_after_steps and max_rows keep their meaning over both tiers: rows
// dropped by them are gone from memory and disk alike, least recently
// touched first (the disk ones found through the store's recency index).
//
// Checkpoints: RowStore::Checkpoint (once for all of a server's tables) and
// Serialize of every table, with no batch in between; Restore the store and
// Deserialize each table to resume.
//
// Thread-safety: none, as SparseTable (the background write touches only
// the table's copy of the rows leaving and the store, and ends before the
// call that started it returns). The store must outlive the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "embedding/background_call.h"
#include "embedding/frequency_sketch.h"
#include "embedding/id_dedup.h"
#include "embedding/id_map.h"
#include "embedding/row_batch.h"
#include "embedding/row_store.h"
#include "embedding/sparse_table.h"

namespace pstrain {

// Which rows stay in memory when there is no room for all (see above).
enum class TierPolicy { kLru, kTinyLfu };
// "lru" / "tinylfu"; InvalidArgument for anything else.
StatusOr<TierPolicy> ParseTierPolicy(const std::string& text);

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
                                      RowStore* store, TierPolicy policy = kDefaultPolicy);
  static constexpr TierPolicy kDefaultPolicy = TierPolicy::kTinyLfu;
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

  // Rows moving between servers when servers join or leave a running job
  // (roles/server/table_rows.h), in tiered_table_move.cc. Between batches
  // no write is under way and the rows chosen to leave memory are still
  // there, so both see every row in exactly one place.
  //
  // TakeRows removes and returns every row whose id `leaving` accepts, from
  // memory and disk (rows of dim * (1 + slots) floats, with last-touched
  // step and update count), in memory's order then id order; their disk
  // records (a row in memory may keep a stale one) are erased in one write.
  // It reads every record on disk once. A failed read or write changes
  // nothing.
  StatusOr<RowBatch> TakeRows(const std::function<bool(int64_t)>& leaving);
  // The rows on disk alone (not in memory), in id order, to `fn` in
  // batches of at most `max_rows`: with Serialize's bytes, they are the
  // whole table (a backup's copy, roles/server/table_replication.cc).
  // Reads every record on disk once; changes nothing. Between batches only,
  // as TakeRows.
  Status ForEachDiskBatch(size_t max_rows, const std::function<Status(RowBatch batch)>& fn) const;
  // PutRows adds rows that SparseTable::CheckNewRows accepts and that have
  // no row on disk here either (else InvalidArgument, changing nothing),
  // as they were. Memory keeps at most its budget: the least recently
  // touched of the rows here and the rows added go to disk, in one write
  // (a failed one changes nothing). Past max_rows, the next Lookup drops
  // the least recently touched rows, as after any batch. Memory: the rows
  // added, once more.
  Status PutRows(const RowBatch& rows);
  // PutRows is CheckNewRows (it reads the disk for the rows' ids), then
  // PutCheckedRows, which a caller checking several tables first calls
  // alone, with no change to the table in between.
  Status CheckNewRows(const RowBatch& rows);
  Status PutCheckedRows(const RowBatch& rows);

  Status CheckId(int64_t id) const { return memory_.CheckId(id); }
  const EmbeddingTableOptions& options() const { return options_; }
  const SparseOptimizer& optimizer() const { return memory_.optimizer(); }
  int64_t budget_rows() const { return budget_rows_; }
  int64_t table_updates() const { return memory_.table_updates(); }
  void CatchUpSchedule(int64_t pushes) { memory_.CatchUpSchedule(pushes); }
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
  // Access counts (TinyLFU) start again from zero: they decide where rows
  // live, never what they hold.
  static StatusOr<TieredTable> Deserialize(const EmbeddingTableOptions& options,
                                           int64_t budget_rows, RowStore* store, const void* data,
                                           size_t size, TierPolicy policy = kDefaultPolicy);
  // The table a checkpoint of an all-in-memory SparseTable (its Serialize
  // bytes) holds, over `store` (a new table there), for a job that resumes
  // with a budget where the one that wrote the checkpoint had none: the
  // least recently touched rows past the budget are written to disk before
  // it returns, in writes of at most 65536 rows. Memory: the whole table
  // once, as the checkpoint held it.
  static StatusOr<TieredTable> FromSparseTable(const EmbeddingTableOptions& options,
                                               int64_t budget_rows, RowStore* store,
                                               const void* data, size_t size,
                                               TierPolicy policy = kDefaultPolicy);
  // What Serialize wrote before the rows in memory, checked, for readers
  // without a table (pstrain export): the rows on disk, and the offset of
  // the rows in memory (SparseTable::ReadSerializedRows reads them).
  struct SerializedHeader {
    int64_t disk_rows;
    size_t rows_at;
  };
  static StatusOr<SerializedHeader> ReadSerializedHeader(const std::string& name, const void* data,
                                                         size_t size);
  // Whether the table's store keeps a recency index (max_rows or
  // evict_after_steps): how its store table must be opened.
  static bool NeedsRecency(const EmbeddingTableOptions& options);

 private:
  TieredTable(const EmbeddingTableOptions& options, int64_t budget_rows, RowStore* store,
              RowStore::TableId table, SparseTable memory, TierPolicy policy);
  // The table over `memory` and a table of `store` (a new one when
  // new_table, else opened or created); budget_rows is checked.
  static StatusOr<TieredTable> Over(const EmbeddingTableOptions& options, int64_t budget_rows,
                                    RowStore* store, SparseTable memory, TierPolicy policy,
                                    bool new_table);
  // The options of the in-memory part: no max_rows (this class keeps it).
  static EmbeddingTableOptions MemoryOptions(const EmbeddingTableOptions& options);

  // Steps 1 to 4 of the top of this file, but the operation. `creates`:
  // Lookup, which may create rows for ids it does not find.
  Status BringIn(const int64_t* ids, size_t n, bool creates);
  // Step 5.
  void ChooseLeaving();
  // Drops the least recently touched rows past max_rows.
  Status DropPastMaxRows();
  Status DropFromDisk(int64_t touched_before, int64_t max_count);
  // Writes the least recently touched rows past the budget to disk, now.
  Status SpillPastBudget();
  // Reads missing_ into fetched_ (step 2), in two halves when large, one
  // on the writer's thread.
  Status ReadMissing();
  // Writes spilled_ on another thread; FinishWrite waits for it and, once
  // written, removes the rows from memory (else keeps them for later).
  void StartWrite();
  void FinishWrite();
  // Forgets the rows chosen to leave that are no longer in memory.
  void ForgetLeavingGone();

  EmbeddingTableOptions options_;
  int64_t budget_rows_;
  RowStore* store_;  // not owned; outlives the table
  RowStore::TableId table_;
  SparseTable memory_;
  TierPolicy policy_;
  // Rows read back keep their disk copy, which the next spill overwrites:
  // no erasure per row read. Not with max_rows or evict_after_steps, whose
  // recency index must hold only rows on disk alone.
  bool keeps_disk_copies_;
  FrequencySketch sketch_;  // ids asked for, recently (kTinyLfu)
  int64_t disk_rows_ = 0;
  int64_t dropped_ = 0;           // rows dropped besides memory_'s own evictions
  int64_t capacity_dropped_ = 0;  // of those, for max_rows
  TieredTableCounters moved_;     // spilled and fetched
  // Buffers kept between batches, so a steady batch allocates nothing.
  IdDedup dedup_;
  FlatIdMap<bool> in_batch_;  // the batch's ids, once in memory
  std::vector<int64_t> missing_, incoming_;
  std::vector<int64_t> leaving_;  // rows to spill at the next batch
  std::vector<int64_t> leave_now_;
  RowBatch fetched_, spilled_;
  RowBatch fetched_back_;  // ReadMissing's second half
  std::vector<RowStore::Erasure> erase_;
  const std::vector<RowStore::Erasure> no_erasures_;
  // Writes spilled_ between StartWrite and FinishWrite; a pointer, so that
  // the table stays movable.
  std::unique_ptr<BackgroundCall> writer_ = std::make_unique<BackgroundCall>();
  Status write_error_;  // of the last write, for the next batch
};

}  // namespace pstrain
