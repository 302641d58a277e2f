// ServerRows: one server-held table's rows on a server, in memory
// (embedding/sparse_table.h) or, when its rule sets a memory budget
// (server_cache_rows or server_cache_bytes), in memory over the server's
// RowStore on disk (embedding/tiered_table.h). TableHost runs the same
// operations on either.
//
// Thread-safety: none; the table thread's, as the tables it holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "embedding/row_store.h"
#include "embedding/sparse_table.h"
#include "embedding/tiered_table.h"
#include "roles/placement/server_tables.h"

namespace pstrain {

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

 private:
  explicit ServerRows(SparseTable memory) : memory_(std::move(memory)) {}
  explicit ServerRows(TieredTable tiered) : tiered_(std::move(tiered)) {}

  std::optional<SparseTable> memory_;  // exactly one of the two
  std::optional<TieredTable> tiered_;
};

}  // namespace pstrain
