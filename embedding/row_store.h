// RowStore: one server's embedding rows on local disk, for tables larger than
// the server's memory (TieredTable keeps the hot rows in memory over it).
//
// One RocksDB instance per directory, one column family per table. Key: the
// row's id, 8 bytes big-endian, so a table iterates in id order (ids are
// >= 0). Value: the row record, fixed width, little-endian:
//   floats f32 (dim values, then num_slots * dim optimizer slots),
//   last_touched i64, updates i64.
// Every record read back is checked (size, finite floats, update count >= 0)
// before use: a damaged one is an error naming the table and the id.
// A table opened `by_recency` also keeps a second column family keyed by
// (last_touched, id), so that the least recently touched rows on disk can be
// dropped without a scan (evict_after_steps, max_rows).
//
// The store is a spill area, not a log: a fresh Open empties the directory,
// and a server that restarts resumes from a checkpoint (Checkpoint, Restore),
// never from what a killed process left behind. Hence no write-ahead log.
//
// Errors are one line that names the directory and what failed ("embedding
// store /x/y: IO error: No space left on device ... while writing 512 rows of
// table 'emb'"). A failed Write changes nothing the caller can see: the rows
// it carried are still the caller's to keep.
//
// Thread-safety: OpenTable must not run beside other calls; everything else
// may run on several threads at once (RocksDB's own guarantee).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embedding/row_batch.h"
#include "src/common/status.h"

namespace pstrain {

struct RowStoreOptions {
  // Shared by all tables: the files' filter and index partitions (half of
  // it, at high priority), and data blocks read recently (LRU). Rows are
  // read once when they come back to memory, so a large cache of data
  // blocks mostly duplicates the table's own memory. Bounded, whatever the
  // rows on disk.
  size_t block_cache_bytes = size_t{64} << 20;
  // Per table: rows written (spilled) but not yet in a file; two of them at
  // most (one being flushed).
  size_t write_buffer_bytes = size_t{32} << 20;
  // false: no background compaction, for a store restored only to be read
  // (pstrain export and eval), which would otherwise rewrite it whole.
  bool compact = true;
};

class RowStore {
 public:
  using TableId = int;
  struct Erasure {
    int64_t id;
    int64_t last_touched;  // as stored; finds the recency entry
  };

  // An empty store in `dir`, created when missing (its parent must exist);
  // rows a previous store left there are deleted.
  static StatusOr<std::unique_ptr<RowStore>> Open(const std::string& dir,
                                                  const RowStoreOptions& options = {});
  // The store `checkpoint_dir` (written by Checkpoint) holds, in `dir`:
  // its files are hard-linked (copied across file systems) into `dir`,
  // which is emptied first; the checkpoint itself is never changed.
  static StatusOr<std::unique_ptr<RowStore>> Restore(const std::string& checkpoint_dir,
                                                     const std::string& dir,
                                                     const RowStoreOptions& options = {});
  ~RowStore();
  RowStore(const RowStore&) = delete;
  RowStore& operator=(const RowStore&) = delete;

  // Opens table `name`, whose rows are `floats` floats plus the two
  // integers, creating it when absent. must_be_new: an existing table is an
  // error (a fresh table must not see rows of another run).
  StatusOr<TableId> OpenTable(const std::string& name, size_t floats, bool by_recency,
                              bool must_be_new);
  // Drops table `name` and its rows, if open, so that OpenTable may make it
  // new (a backup's copy made again from its primary's state). The table
  // over it must be gone first; other tables keep their ids.
  Status DropTable(const std::string& name);

  // Looks up ids[0, n) in one batched read; appends the rows found to
  // *found (ids absent from disk are left out). An IO error or a damaged
  // record fails the whole call and leaves *found as it was.
  Status MultiGet(TableId table, const int64_t* ids, size_t n, RowBatch* found) const;

  // Erases `erase` first, then writes `put`, as one atomic batch.
  Status Write(TableId table, const RowBatch& put, const std::vector<Erasure>& erase);

  // Erases rows last touched before `touched_before`, least recent first, at
  // most max_count; returns how many. Needs a table opened by_recency.
  StatusOr<int64_t> EraseOldest(TableId table, int64_t touched_before, int64_t max_count);

  // The earliest last-touched step of the table's rows on disk, or INT64_MAX
  // when it has none. Needs a table opened by_recency.
  StatusOr<int64_t> OldestTouched(TableId table) const;

  // The rows of a table in id order, read ahead in bounded memory (for
  // export). Stop at !Valid(), then check status().
  class Iterator {
   public:
    virtual ~Iterator() = default;
    virtual bool Valid() const = 0;
    virtual void Next() = 0;
    virtual Status status() const = 0;
    virtual int64_t id() const = 0;
    virtual const float* data() const = 0;  // floats of the table
    virtual int64_t last_touched() const = 0;
    virtual int64_t updates() const = 0;
  };
  std::unique_ptr<Iterator> NewIterator(TableId table) const;

  // A consistent copy of every table in `checkpoint_dir` (which must not
  // exist), hard-linked where it can be: cheap, whatever the store's size.
  Status Checkpoint(const std::string& checkpoint_dir);
  // Writes what is buffered in memory to files (tests, before they damage
  // files; Checkpoint does it itself).
  Status Flush();

  const std::string& dir() const { return dir_; }
  const std::string& table_name(TableId table) const;

 private:
  struct Impl;
  RowStore(std::string dir, std::unique_ptr<Impl> impl);
  // Opens the store in `dir` as it is.
  static StatusOr<std::unique_ptr<RowStore>> OpenAsIs(const std::string& dir,
                                                      const RowStoreOptions& options);

  std::string dir_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pstrain
