// ServerRows: one server-held table's rows on a server, in memory
// (embedding/sparse_table.h) or, when its rule sets a memory budget
// (server_cache_rows or server_cache_bytes), in memory over the server's
// RowStore on disk (embedding/tiered_table.h). TableHost runs the same
// operations on either.
//
// Thread-safety: none; the table thread's, as the tables it holds.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "embedding/row_store.h"
#include "embedding/sparse_table.h"
#include "embedding/tiered_table.h"
#include "roles/placement/server_tables.h"

namespace pstrain {

// An order-independent fingerprint of a table's rows: their count, and the
// sum (mod 2^64) of a 64-bit hash of each row's id, values, optimizer slots
// (bit patterns), last-touched step and update count. Tables holding the
// same rows, wherever each is held, have the same digest, and the digests
// of a table's shares add up to the whole's: a move between servers keeps
// the sum over them.
struct RowsDigest {
  int64_t rows = 0;
  uint64_t sum = 0;
  int64_t updates = 0;  // the rows' update counts, summed

  RowsDigest& operator+=(const RowsDigest& other) {
    rows += other.rows;
    sum += other.sum;
    updates += other.updates;
    return *this;
  }
  bool operator==(const RowsDigest& other) const { return rows == other.rows && sum == other.sum; }
};

class ServerRows {
 public:
  // `store` must outlive the table; it is used only when `table` has a
  // memory budget (then it must not be null).
  static StatusOr<ServerRows> Create(const ServerTable& table, RowStore* store);
  // The table a checkpoint's bytes hold (ServerRows::Serialize), `tiered` as
  // it was written. A checkpoint of a table all in memory resumes with a
  // budget too (the rows past it go to disk first); one with rows on disk
  // needs a budget.
  static StatusOr<ServerRows> Deserialize(const ServerTable& table, RowStore* store, bool tiered,
                                          const std::string& bytes);

  // A backup's copy (roles/server/table_replication.cc): the primary sends
  // Serialize's bytes and then, for a tiered table, its rows on disk alone
  // (ForEachDiskBatch, in batches of at most `max_rows`); the copy starts
  // from the bytes (ReplicaFrom, opening a new table in `store` for a
  // tiered one) and is whole once *disk_rows_to_come more rows came
  // (PutRows).
  static StatusOr<ServerRows> ReplicaFrom(const ServerTable& table, RowStore* store,
                                          const std::string& bytes, int64_t* disk_rows_to_come);
  Status ForEachDiskBatch(size_t max_rows, const std::function<Status(RowBatch batch)>& fn) const;

  ServerRows(ServerRows&&) = default;
  ServerRows& operator=(ServerRows&&) = delete;

  bool tiered() const { return tiered_.has_value(); }
  Status Lookup(const int64_t* ids, size_t n, float* out, int64_t step);
  Status ApplyGradients(const int64_t* ids, const float* grads, size_t n, int64_t step);
  StatusOr<int64_t> EvictUntouched(int64_t step);
  Status CheckId(int64_t id) const;
  void Serialize(std::string* out) const;
  const EmbeddingTableOptions& options() const;
  EmbeddingTableCounters counters() const;
  // Rows in memory and on disk, for the log line: "" when not tiered.
  std::string DescribeTiers() const;

  // Rows moving live between servers when servers join or leave. The clock
  // and push count (the lr schedule's) are the server's and stay; so do the
  // sightings of ids not yet admitted, which start again on the new server.
  //
  // Removes and returns every row whose id `leaving` accepts, wherever it
  // lives (memory or disk): values and optimizer slots (RowBatch floats =
  // dim * (1 + slots)), last-touched step, update count. A failure (the
  // disk) changes nothing.
  StatusOr<RowBatch> TakeRows(const std::function<bool(int64_t)>& leaving);
  // The same rows copied, left in place: a move copied ahead of its step
  // (roles/server/table_moves.h). Tables all in memory only: a tiered
  // table's rows are not copied (nullopt), as holding them aside would
  // break the memory budget of the server they go to.
  std::optional<RowBatch> CopyRows(const std::function<bool(int64_t)>& leaving) const;
  // Removes the rows of `ids` that are here (a copy ahead installed early,
  // replaced or dropped at the change).
  Status RemoveRows(const std::vector<int64_t>& ids);
  // Adds `rows` (from TakeRows of a table with the same options) as they
  // were: values, slots, last-touched step, update count; each takes its
  // place in the recency order by its last-touched step. An id that has a
  // row here, is in `rows` twice or is not valid, or a batch of another
  // floats per row, is InvalidArgument and changes nothing. A tiered table
  // keeps at most its budget in memory and writes the rest to its store
  // (the least recently touched first). Past max_rows, the least recently
  // touched rows are evicted: at once in memory; by the next Lookup for a
  // tiered table (tiered_table.h).
  Status PutRows(const RowBatch& rows);
  // PutRows is these two: a move checks every table's rows before it
  // installs any (PutCheckedRows, with no change in between).
  Status CheckNewRows(const RowBatch& rows);
  Status PutCheckedRows(const RowBatch& rows);
  // The lr schedule's clock (SparseTable::table_updates, CatchUpSchedule).
  int64_t table_updates() const;
  void CatchUpSchedule(int64_t pushes);
  // The digest of every row, in memory and on disk (reads the disk once).
  StatusOr<RowsDigest> Digest() const;
  // A copy of id's row wherever it is; nullopt when it has none. Touches
  // nothing.
  StatusOr<std::optional<TieredTable::Row>> Find(int64_t id) const;

 private:
  explicit ServerRows(SparseTable memory) : memory_(std::move(memory)) {}
  explicit ServerRows(TieredTable tiered) : tiered_(std::move(tiered)) {}

  std::optional<SparseTable> memory_;  // exactly one of the two
  std::optional<TieredTable> tiered_;
};

}  // namespace pstrain
