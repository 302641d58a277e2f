// SparseTable: one server's share of one embedding table. Rows are created on
// first touch (after admission), updated by a SparseOptimizer, and removed
// when idle or when the table is full.
//
// Layout: a FlatIdMap from id to row index; the rows themselves in a
// RowArena (2 MiB blocks), row r of stride floats: [values | optimizer
// slots], with per-row metadata (id, last touched step, update count,
// recency links) in a parallel array. Removing a row moves the last row
// into its place, so the rows stay dense and nothing is allocated per row.
//
// Recency: rows form a list ordered by the step they were last touched
// (looked up or pushed), most recent first. A row moves to the front at most
// once per step, so hot rows cost nothing extra; EvictUntouched pops idle rows
// off the back in O(evicted), and a table at max_rows evicts its back row,
// the least recently touched, to make room.
//
// Steps: `step` is the server's clock. A call with a step below the largest
// seen so far is taken as that largest step (async workers report their own).
//
// Thread-safety: none. One thread (the server's) owns a table; distinct
// tables share nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "embedding/id_map.h"
#include "embedding/recency_list.h"
#include "embedding/row_arena.h"
#include "embedding/row_batch.h"
#include "embedding/sparse_optimizer.h"
#include "embedding/table_options.h"
#include "src/common/status.h"
#include "src/common/tensor_memory.h"

namespace pstrain {

// What a table has done since it was created or restored; a server logs them.
struct EmbeddingTableCounters {
  int64_t rows = 0;                // rows held now
  int64_t admissions = 0;          // rows created
  int64_t evictions = 0;           // rows removed, idle or for room
  int64_t capacity_evictions = 0;  // of those, removed because of max_rows
  int64_t lookups = 0;             // ids looked up
  int64_t dropped_gradients = 0;   // pushed rows without a row (not admitted or evicted)
  int64_t pending_ids = 0;         // ids seen but not yet admitted
};

class SparseTable {
 public:
  // An empty table; InvalidArgument when options do not Validate().
  static StatusOr<SparseTable> Create(const EmbeddingTableOptions& options);

  SparseTable(SparseTable&&) = default;
  SparseTable& operator=(SparseTable&&) = delete;

  // Writes n rows of dim floats to out (row i for ids[i]). A known id touches
  // its row; an unknown one counts a sighting and creates its row (InitRow)
  // once admitted, else reads as zeros. Every id is checked first: a negative
  // id, or one >= vocab when vocab > 0, fails the whole call with
  // InvalidArgument naming the table and the id, changing nothing.
  Status Lookup(const int64_t* ids, size_t n, float* out, int64_t step);

  // Applies grads (n rows of dim floats, row i for ids[i]) to the rows, one
  // optimizer update each, in order (callers send each id once per push).
  // Ids without a row are skipped and counted in dropped_gradients; rows are
  // created only by Lookup. Ids are checked as by Lookup.
  Status ApplyGradients(const int64_t* ids, const float* grads, size_t n, int64_t step);

  // Removes rows last touched more than evict_after_steps before `step`;
  // returns how many (always 0 when evict_after_steps is 0).
  int64_t EvictUntouched(int64_t step);

  // A row as stored, for checkpoints, tests and debugging; pointers are valid
  // until the next call that changes the table.
  struct RowView {
    const float* values;  // dim floats
    const float* slots;   // optimizer().num_slots() * dim floats
    int64_t last_touched;
    int64_t updates;  // optimizer updates of this row (Adam's t)
  };
  std::optional<RowView> Find(int64_t id) const;

  // OK, or the InvalidArgument Lookup would return for id.
  Status CheckId(int64_t id) const;

  // Hooks for a table that keeps its least recently touched rows elsewhere
  // (TieredTable moves them to disk and back), for tables without max_rows.
  // None of them counts as an admission or an eviction.
  int64_t clock() const { return clock_; }
  // Up to k ids of the least recently touched rows, least recent first,
  // skipping those `skip` accepts.
  std::vector<int64_t> BackIds(size_t k, const std::function<bool(int64_t)>& skip) const;
  // Appends the rows of `ids`, which must all have one, to *out (out->floats
  // must be the row stride).
  void CopyRows(const std::vector<int64_t>& ids, RowBatch* out) const;
  // Removes the rows of `ids`, which must all have one.
  void Remove(const std::vector<int64_t>& ids);
  // Adds the rows of `rows` (ids without a row here) at the front of the
  // recency list, least recent first, each with its values, slots,
  // last-touched step and update count as given.
  void InsertRows(const RowBatch& rows);
  // The ids of every row, in no particular order.
  std::vector<int64_t> Ids() const;

  // Rows that move in from another server's share (roles/server/table_rows.h).
  // CheckNewRows: OK, or InvalidArgument naming the table and what is wrong,
  // unless rows.floats is the row stride, the batch's arrays agree in size,
  // and every id is valid (CheckId), has no row here, is not in the batch
  // twice, and has no negative step or update count.
  Status CheckNewRows(const RowBatch& rows) const;
  // Adds rows CheckNewRows accepts, each with its values, slots,
  // last-touched step and update count, and placed in the recency list by
  // its last-touched step among the rows here (ties: the rows here less
  // recent), so that it is evicted when it would have been had it always
  // been here. Past max_rows, the least recently touched rows are then
  // evicted, as Deserialize does. Not admissions; the clock and push count
  // stay. O(rows here + rows added): it relinks the whole recency list;
  // O(rows added) when none is older than the most recent row here (they
  // go in front; the rows here are taken as ordered by step, as they are
  // but for rows read back from disk out of order, InsertRows).
  void MergeRows(const RowBatch& rows);

  const EmbeddingTableOptions& options() const { return options_; }
  const SparseOptimizer& optimizer() const { return optimizer_; }
  EmbeddingTableCounters counters() const;
  size_t rows() const { return meta_.size(); }
  // Pushes applied so far (the lr schedule's clock).
  int64_t table_updates() const { return table_updates_; }
  // The lr schedule goes on from `pushes` when it is behind: a server that
  // joined a running job takes the count of those its rows come from.
  void CatchUpSchedule(int64_t pushes) { table_updates_ = std::max(table_updates_, pushes); }

  // Appends the table's state to *out: every existing row with its values,
  // optimizer slots, last-touched step and update count, plus the clock and
  // push count. Format (little-endian, fixed width) in sparse_table_io.cc.
  void Serialize(std::string* out) const;
  // The table `data` holds, which must have been serialized by a table with
  // the same name, dim and optimizer type. Damaged or hostile bytes give
  // InvalidArgument naming the table and what is wrong, never a crash.
  // Restoring more rows than options.max_rows evicts the least recently
  // touched ones.
  static StatusOr<SparseTable> Deserialize(const EmbeddingTableOptions& options, const void* data,
                                           size_t size);
  // The rows Serialize wrote, read in place without the table's options
  // (pstrain export reads tables larger than memory this way): the bytes
  // are checked as Deserialize checks them (magic, CRC, version, the name),
  // and each row's id is listed with where its floats (values, then slots;
  // unaligned) start in `data`, which must outlive the result; in the order
  // written.
  struct SerializedRows {
    uint32_t dim = 0;
    uint32_t slots = 0;  // optimizer floats per element
    std::vector<std::pair<int64_t, const uint8_t*>> rows;
  };
  static StatusOr<SerializedRows> ReadSerializedRows(const std::string& name, const void* data,
                                                     size_t size);

  // One table made of the rows and pending sightings of `shards` (tables of
  // `options`, as several servers held it) that `keep` accepts: a
  // checkpoint resumed with another server count. Rows keep their values,
  // slots, last-touched step and update count; recency interleaves the
  // shards' by last-touched step (ties: the earlier shard's row less
  // recent); the clock and push count are the largest of the shards'. An id
  // kept from two shards is InvalidArgument (a row lives on one server).
  static StatusOr<SparseTable> Gather(const EmbeddingTableOptions& options,
                                      const std::vector<SparseTable>& shards,
                                      const std::function<bool(int64_t)>& keep);

 private:
  static constexpr uint32_t kNone = RecencyList::kNone;
  struct RowMeta {
    int64_t id;
    int64_t last_touched;
    int64_t updates;
    uint32_t prev;  // toward the front (more recent)
    uint32_t next;  // toward the back
  };

  explicit SparseTable(const EmbeddingTableOptions& options);

  Status CheckIds(const int64_t* ids, size_t n) const;
  void AdvanceClock(int64_t step);
  float* RowData(uint32_t row) { return arena_.Row(row); }
  const float* RowData(uint32_t row) const { return arena_.Row(row); }
  // Counts a sighting of an id without a row; true when it is now admitted.
  bool Admit(int64_t id);
  // A new row for id at the front, evicting the back row if the table is full.
  uint32_t AddRow(int64_t id, int64_t last_touched);
  void RemoveRow(uint32_t row);
  // Past max_rows: the least recently touched rows go.
  void EvictPastLimit();
  void Touch(uint32_t row);
  // Memory prefetching for one pass over a batch's ids (Lookup,
  // ApplyGradients).
  class Prefetcher;

  EmbeddingTableOptions options_;
  SparseOptimizer optimizer_;
  size_t stride_;              // floats per row: dim * (1 + num_slots)
  size_t row_limit_;           // max_rows, or the most a uint32 index allows
  FlatIdMap<uint32_t> index_;  // id -> row
  RowArena arena_;
  // On 2 MiB pages once large (tensor_memory.h), like the arena: read in
  // random order.
  std::vector<RowMeta, TensorAllocator<RowMeta>> meta_;
  RecencyList lru_;                // through meta_
  FlatIdMap<uint32_t> sightings_;  // id -> lookups so far, for ids not admitted
  int64_t clock_ = 0;
  int64_t table_updates_ = 0;
  EmbeddingTableCounters counters_;
};

}  // namespace pstrain
