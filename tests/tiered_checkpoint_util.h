// A checkpoint of a table with rows on disk, written with the server's own
// pieces (TieredTable over a RowStore, the store's checkpoint, the shard
// file listing it, the model layout, the MANIFEST), for the tests of export
// and eval (checkpoint_table_test, export_memory_test).
#pragma once

#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "embedding/row_store.h"
#include "embedding/tiered_table.h"
#include "roles/checkpoint/model_layout.h"
#include "roles/checkpoint/shard_file.h"
#include "roles/checkpoint/store.h"
#include "src/common/checkpoint_file.h"
#include "tests/tiered_test_util.h"

namespace pstrain::testing {

// Row k's id: scattered over 40 bits, never twice (an odd multiplier is a
// bijection modulo 2^40), so that creation order is not id order.
inline int64_t ScatteredId(int64_t k) {
  return static_cast<int64_t>((static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull) &
                              ((uint64_t{1} << 40) - 1));
}

struct TieredCheckpoint {
  int servers = 1;
  int64_t rows = 0;    // ids ScatteredId(0..rows-1), on server id % servers
  int64_t budget = 0;  // rows in each server's memory
  int dim = 8;
  // Added to server 0's count of rows on disk in its shard file: a shard
  // file that does not match its store.
  int64_t disk_rows_error = 0;
};

// Step 1 of `dir` as `c` says, table "emb" (Adagrad); every row's values
// into *values when not null.
inline void WriteTieredCheckpoint(const std::string& dir, const TieredCheckpoint& c,
                                  std::map<int64_t, std::vector<float>>* values = nullptr) {
  const std::string step_dir = CheckpointStepDir(dir, 1);
  std::filesystem::create_directories(step_dir);
  const EmbeddingTableOptions options = TierOptions(OptimizerType::kAdagrad, c.dim);
  std::vector<std::string> files;
  for (int rank = 0; rank < c.servers; ++rank) {
    TempDir live;
    RowStoreOptions small;
    small.write_buffer_bytes = size_t{8} << 20;
    small.block_cache_bytes = size_t{8} << 20;
    auto store = RowStore::Open(live / "store", small);
    REQUIRE_MESSAGE(store.ok(), store.status().message());
    auto table = TieredTable::Create(options, c.budget, store->get());
    REQUIRE_MESSAGE(table.ok(), table.status().message());
    // Rows leave memory at the batch after the one that brought them in.
    constexpr size_t kBatch = 512;
    std::vector<int64_t> ids;
    std::vector<float> out(kBatch * c.dim);
    int64_t step = 0, held = 0;
    for (int64_t k = 0; k < c.rows; ++k) {
      const int64_t id = ScatteredId(k);
      if (id % c.servers == rank) ids.push_back(id), ++held;
      if (ids.size() < kBatch && k + 1 < c.rows) continue;
      Status st = table->Lookup(ids.data(), ids.size(), out.data(), ++step);
      REQUIRE_MESSAGE(st.ok(), st.message());
      ids.clear();
    }
    // Most rows on disk, as the callers mean to test.
    REQUIRE(table->tier_counters().on_disk >= held - c.budget - 2 * int64_t{kBatch});
    if (values != nullptr) {
      Status st = table->ForEachRow([&](int64_t id, const SparseTable::RowView& row) {
        (*values)[id].assign(row.values, row.values + c.dim);
        return Status::OK();
      });
      REQUIRE(st.ok());
    }
    const std::string store_dir = step_dir + "/" + StoreCheckpointDirName(rank);
    Status st = (*store)->Checkpoint(store_dir);
    REQUIRE_MESSAGE(st.ok(), st.message());
    TableSnapshot snapshot{options.name, step, true, {}};
    table->Serialize(&snapshot.bytes);
    if (rank == 0 && c.disk_rows_error != 0) {
      // TieredTable's header: magic, version, disk rows, CRC-32 of those.
      int64_t disk_rows;
      std::memcpy(&disk_rows, snapshot.bytes.data() + 12, 8);
      disk_rows += c.disk_rows_error;
      std::memcpy(snapshot.bytes.data() + 12, &disk_rows, 8);
      const auto crc = static_cast<uint32_t>(
          crc32(0, reinterpret_cast<const Bytef*>(snapshot.bytes.data()), 20));
      std::memcpy(snapshot.bytes.data() + 20, &crc, 4);
    }
    StoreDigests digests;
    auto listed = digests.List(store_dir);
    REQUIRE_MESSAGE(listed.ok(), listed.status().message());
    files.push_back(ShardFileName(rank));
    REQUIRE(WriteShardFile(step_dir + "/" + files.back(), ShardMeta{rank, c.servers, 1}, {},
                           {snapshot}, &*listed)
                .ok());
  }
  ModelLayout layout;
  layout.tables = {{options.name, c.dim}};
  auto layout_file = WriteModelLayout(step_dir, layout);
  REQUIRE(layout_file.ok());
  files.push_back(*layout_file);
  REQUIRE(WriteManifest(dir, 1, files).ok());
}

}  // namespace pstrain::testing
