// CheckpointTable: one server-held table of a checkpoint, every server's
// share, for pstrain export and eval (roles/checkpoint/weights.h makes it).
//
// A share is a shard file's section (roles/checkpoint/shard_file.h): "t/<table>", all
// rows in the section's bytes, or "tiered/<table>", the rows that were in
// memory in the bytes and the others in the server's store checkpoint,
// restored for reading. The bytes are parsed here without the job's config
// (only the layout's dim is known), as the formats in
// embedding/sparse_table_io.cc and embedding/tiered_table_io.cc describe;
// every count is checked against the bytes present.
//
// Memory: a pointer per row in the sections' bytes (those are in memory
// anyway); the rows on disk are streamed (ForEachRow) or read batch by
// batch (Gather), never held, so a table larger than memory is read in
// memory bounded by what the servers had in memory.
//
// Points into the CheckpointWeights that made it, which must outlive it.
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "embedding/row_store.h"
#include "src/common/status.h"

namespace pstrain {

class CheckpointTable {
 public:
  struct Share {
    std::string path;  // the shard file, for messages
    // The section's rows, ascending ids; row k's dim floats start at
    // memory_rows[k] (unaligned).
    std::vector<int64_t> memory_ids;
    std::vector<const uint8_t*> memory_rows;
    RowStore* store = nullptr;  // the restored store, for a tiered share
    RowStore::TableId table = 0;
    size_t floats = 0;      // of a record on disk: values and optimizer slots
    int64_t disk_rows = 0;  // as the section says
  };

  CheckpointTable(std::string name, int64_t dim) : name_(std::move(name)), dim_(dim) {}
  CheckpointTable(CheckpointTable&&) = default;

  // Adds the share a "t/<name>" (tiered false) or "tiered/<name>" section
  // holds: `bytes` after the section's clock. A tiered share needs `store`,
  // the restored store of that server (not owned).
  Status AddShare(const std::string& path, bool tiered, const uint8_t* bytes, size_t size,
                  RowStore* store);

  const std::string& name() const { return name_; }
  int64_t dim() const { return dim_; }
  // Rows in all, as the sections say; ForEachRow checks them as it goes.
  int64_t rows() const { return rows_; }

  // Calls fn(id, dim floats) for every row of every share, ascending ids:
  // exactly rows() calls, or an error (a row held twice, a store with more
  // or fewer rows than its section says, a damaged record, fn's own).
  Status ForEachRow(const std::function<Status(int64_t id, const float* values)>& fn) const;

  // For each of the distinct ids[0, n): its values into out[i * dim] and
  // found[i] = 1 when the checkpoint holds it, else found[i] = 0 and out
  // untouched. One batched read per store.
  Status Gather(const int64_t* ids, size_t n, float* out, std::vector<char>* found) const;

 private:
  std::string name_;
  int64_t dim_;
  int64_t rows_ = 0;
  std::vector<Share> shares_;
};

}  // namespace pstrain
