// bench embedding --cases store: what the tiered tables' store
// (embedding/row_store.h, RocksDB) costs per row on this machine and disk,
// alone: the floor under the tiered case's rate. Rows have the tiered
// case's shape: dim values and one Adagrad slot per value, plus the
// last-touched step and update count.
//   write_us_per_row: --tier-ids rows of fresh ids, in writes of 3000 rows
//     (what the tiered case spills per batch at 10% resident), then a
//     flush to files; wall time per row. write_cpu_us_per_row: the
//     process's CPU time over the same span, RocksDB's flush and
//     compaction threads included (compactions still running at the end
//     are not counted).
//   read_disk_us_per_row: MultiGet of 1600 ids (what the tiered case reads
//     back per batch at 10% resident) drawn from those rows, once all are
//     in files; wall time per row, on one thread, after as many reads
//     again to warm the block cache (a tiered table reads all the time).
//   read_memtable_us_per_row: the same for rows written last, still in the
//     write buffer (RocksDB's memtable), as rows spilled lately are.
#include "src/app/bench/store.h"

#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#include "embedding/row_batch.h"
#include "embedding/row_store.h"
#include "src/app/bench/clock.h"
#include "src/app/bench/json.h"
#include "src/app/bench/scratch.h"
#include "src/app/bench/zipf.h"
#include "src/common/random.h"

namespace pstrain {
namespace {

constexpr size_t kRowsPerWrite = 3000;
constexpr size_t kIdsPerRead = 1600;
constexpr int kReads = 100;

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Writes rows of ids ScatteredId(first .. first + count - 1), in writes of
// kRowsPerWrite rows.
Status WriteRows(RowStore* store, RowStore::TableId table, size_t floats, int64_t first,
                 int64_t count) {
  RowBatch batch(floats);
  std::vector<float> values(floats);
  for (int64_t n = first; n < first + count;) {
    batch.Clear();
    for (; n < first + count && batch.size() < kRowsPerWrite; ++n) {
      for (size_t k = 0; k < floats; ++k) values[k] = 0.001f * static_cast<float>((n + k) % 997);
      batch.Add(ScatteredId(n), values.data(), n, 1);
    }
    PSTRAIN_RETURN_IF_ERROR(store->Write(table, batch, {}));
  }
  return Status::OK();
}

// Wall seconds per row read by kReads MultiGets of kIdsPerRead draws
// (unique ids) from rows ScatteredId(first .. first + count - 1), every one
// of which must be found.
StatusOr<double> ReadRows(const RowStore& store, RowStore::TableId table, size_t floats,
                          int64_t first, int64_t count, Rng* rng) {
  std::vector<int64_t> ids(kIdsPerRead);
  RowBatch found(floats);
  double seconds = 0;
  size_t read = 0;
  for (int r = 0; r < kReads; ++r) {
    for (int64_t& id : ids)
      id = ScatteredId(first + static_cast<int64_t>(rng->Below(static_cast<uint64_t>(count))));
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    found.Clear();
    const BenchClock::time_point start = BenchClock::now();
    PSTRAIN_RETURN_IF_ERROR(store.MultiGet(table, ids.data(), ids.size(), &found));
    seconds += SecondsSince(start);
    read += ids.size();
    if (found.size() != ids.size())
      return Internal("bench store: " + std::to_string(ids.size() - found.size()) + " of " +
                      std::to_string(ids.size()) + " rows written were not read back");
    ids.resize(kIdsPerRead);
  }
  return seconds / static_cast<double>(read);
}

Status RunDim(int dim, int64_t rows, const std::string& dir) {
  const size_t floats = 2 * static_cast<size_t>(dim);  // values, Adagrad's slot
  const RowStoreOptions options;
  auto store = RowStore::Open(dir, options);
  if (!store.ok()) return store.status();
  auto table = (*store)->OpenTable("emb", floats, false, true);
  if (!table.ok()) return table.status();

  const double cpu_before = ProcessCpuSeconds();
  const BenchClock::time_point start = BenchClock::now();
  PSTRAIN_RETURN_IF_ERROR(WriteRows(store->get(), *table, floats, 0, rows));
  PSTRAIN_RETURN_IF_ERROR((*store)->Flush());
  const double write_seconds = SecondsSince(start);
  const double write_cpu = ProcessCpuSeconds() - cpu_before;

  Rng rng(7);
  auto warm = ReadRows(**store, *table, floats, 0, rows, &rng);
  if (!warm.ok()) return warm.status();
  auto from_disk = ReadRows(**store, *table, floats, 0, rows, &rng);
  if (!from_disk.ok()) return from_disk.status();
  // A quarter of a write buffer: no flush moves them to a file meanwhile.
  const int64_t record_bytes = static_cast<int64_t>(floats * sizeof(float) + 16);
  const int64_t buffered =
      std::min<int64_t>(rows, static_cast<int64_t>(options.write_buffer_bytes) / 4 / record_bytes);
  PSTRAIN_RETURN_IF_ERROR(WriteRows(store->get(), *table, floats, rows, buffered));
  auto from_memtable = ReadRows(**store, *table, floats, rows, buffered, &rng);
  if (!from_memtable.ok()) return from_memtable.status();

  const auto per_row_us = [&](double seconds) {
    return Rounded(1e6 * seconds / static_cast<double>(rows), 3);
  };
  PrintJsonLine({{"bench", "embedding"},
                 {"case", "store"},
                 {"dim", dim},
                 {"rows", rows},
                 {"record_bytes", record_bytes},
                 {"write_us_per_row", per_row_us(write_seconds)},
                 {"write_cpu_us_per_row", per_row_us(write_cpu)},
                 {"read_disk_us_per_row", Rounded(1e6 * *from_disk, 3)},
                 {"read_memtable_us_per_row", Rounded(1e6 * *from_memtable, 3)}});
  return Status::OK();
}

}  // namespace

Status RunStoreBench(const std::vector<int>& dims, const TieredBenchOptions& options) {
  auto dir = ScratchDir::Create(options.store_dir);
  if (!dir.ok()) return dir.status();
  for (int dim : dims) PSTRAIN_RETURN_IF_ERROR(RunDim(dim, options.ids, dir->path() + "/store"));
  return Status::OK();
}

}  // namespace pstrain
