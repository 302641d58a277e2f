// The checkpoint readers fed arbitrary files (seeds: files the code wrote,
// corpus/checkpoint_fuzz/). Each input is read three ways:
//   1. as it is, by ReadCheckpointFile (magic, lengths, checksum);
//   2. with its trailing CRC-32 made right, so the fuzzer gets past the
//      checksum into the section parser;
//   3. the same bytes as a server's shard (ReadShardFile, with the shape its
//      meta section states), and each embedding table in it restored by
//      SparseTable::Deserialize (its own CRC made right too, the options taken
//      from the table's header), as a resuming server does, and listed by
//      SparseTable::ReadSerializedRows, as pstrain export does (after
//      TieredTable::ReadSerializedHeader for a tiered table's);
//   4. a "place" section as a worker's place (ParseWorkerPlace, the text a
//      chief also hands a joining worker), and a batcher started where it
//      says.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "embedding/sparse_table.h"
#include "embedding/tiered_table.h"
#include "roles/checkpoint/shard_file.h"
#include "roles/checkpoint/worker_place.h"
#include "src/common/checkpoint_file.h"
#include "src/data/batcher.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain {
namespace {

void SetCrc(std::vector<uint8_t>* bytes) {
  if (bytes->size() < 4) return;
  const size_t body = bytes->size() - 4;
  uint32_t crc = static_cast<uint32_t>(crc32(0L, bytes->data(), static_cast<uInt>(body)));
  for (int i = 0; i < 4; ++i) (*bytes)[body + i] = static_cast<uint8_t>(crc >> (8 * i));
}

template <typename T>
T Get(const std::string& s, size_t at) {
  T v{};
  if (at + sizeof(T) <= s.size()) std::memcpy(&v, s.data() + at, sizeof(T));
  return v;
}

// Restores a table's bytes with the options its own header names (magic,
// version, name, dim, slots, optimizer type): the checks past the header run.
void RestoreTable(const TableSnapshot& t) {
  std::vector<uint8_t> bytes(t.bytes.begin(), t.bytes.end());
  if (t.tiered) {
    // The tiered header first (export reads it so), then the rows in memory.
    auto header = TieredTable::ReadSerializedHeader(t.name, bytes.data(), bytes.size());
    if (!header.ok()) return;
    if (header->rows_at > bytes.size() || header->disk_rows < 0)
      fuzz::Fail("a tiered header past its bytes, or a negative count");
    bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header->rows_at));
  }
  SetCrc(&bytes);
  const std::string b(bytes.begin(), bytes.end());
  const uint32_t name_size = Get<uint32_t>(b, 12);
  if (name_size > 256 || 16 + name_size + 12 > b.size()) return;
  EmbeddingTableOptions options;
  options.name = b.substr(16, name_size);
  options.dim = static_cast<int>(Get<uint32_t>(b, 16 + name_size));
  const uint32_t type = Get<uint32_t>(b, 16 + name_size + 8);
  if (options.dim < 1 || options.dim > 1024 || type > static_cast<uint32_t>(OptimizerType::kFtrl))
    return;
  options.optimizer.type = static_cast<OptimizerType>(type);
  options.max_rows = t.clock % 2 == 0 ? 0 : 4;  // sometimes restore past the row limit
  auto table = SparseTable::Deserialize(options, bytes.data(), bytes.size());
  if (table.ok() && options.max_rows > 0 && table->rows() > 4)
    fuzz::Fail("a restored table holds more rows than its limit");
  // Export's reader of the same bytes: no row outside them, and every row
  // a restore without a limit holds.
  auto listed = SparseTable::ReadSerializedRows(options.name, bytes.data(), bytes.size());
  if (listed.ok()) {
    const size_t row_bytes = (1 + size_t{listed->slots}) * listed->dim * sizeof(float);
    const uint8_t* end = bytes.data() + bytes.size();
    for (const auto& [id, row] : listed->rows)
      if (row < bytes.data() || row > end || row_bytes > static_cast<size_t>(end - row))
        fuzz::Fail("export's reader lists a row outside the bytes");
  }
  if (table.ok() && options.max_rows == 0 && (!listed.ok() || listed->rows.size() != table->rows()))
    fuzz::Fail("export's reader and a restore disagree on the rows");
}

// A place read back: its rest checks, and a batcher of 64 samples started
// there yields batches of them only.
void StartPlace(const std::string& text, const std::string& path) {
  auto place = ParseWorkerPlace(text, path);
  if (!place.ok()) return;
  if (!place->Rest().Check().ok()) fuzz::Fail("a place whose rest does not check was read");
  static const Dataset data = [] {
    Dataset d;
    d.sample_shape = {1};
    for (int i = 0; i < 64; ++i) {
      d.dense.push_back(static_cast<float>(i));
      d.labels.push_back(0);
    }
    return d;
  }();
  Batcher batcher = Batcher::ForTraining(&data, 4, 0, 2, 1, true, /*keep_tail=*/true);
  batcher.StartEpoch(0, place->position % 64, place->Rest());
  Batch batch;
  for (int i = 0; i < 20 && batcher.Next(&batch); ++i)
    for (float v : batch.dense.data)
      if (!(v >= 0 && v < 64)) fuzz::Fail("a batch of a sample outside the data");
}

}  // namespace
}  // namespace pstrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  static fuzz::ScratchFiles scratch;
  static const std::string path = [] {
    std::string p = fuzz::ScratchPath("checkpoint");
    scratch.Add(p);
    return p;
  }();

  fuzz::WriteScratch(path, data, size);
  auto raw = ReadCheckpointFile(path);
  if (!raw.ok() && raw.status().message().find(path) == std::string::npos)
    fuzz::Fail("an error that does not name the file:", raw.status().message());

  std::vector<uint8_t> fixed(data, data + size);
  pstrain::SetCrc(&fixed);
  fuzz::WriteScratch(path, fixed.data(), fixed.size());
  auto sections = ReadCheckpointFile(path);
  if (!sections.ok() || sections->empty()) return 0;

  ShardMeta meta;
  const Section& first = (*sections)[0];
  std::string text(first.bytes.begin(), first.bytes.end());
  if (first.name == "place") {
    pstrain::StartPlace(text, path);
    return 0;
  }
  if (std::sscanf(text.c_str(), "server %d\nservers %d\nworkers %d\n", &meta.server, &meta.servers,
                  &meta.workers) != 3)
    return 0;
  auto shard = ReadShardFile(path, meta);
  if (!shard.ok()) return 0;
  for (const TableSnapshot& t : shard->tables) pstrain::RestoreTable(t);
  return 0;
}
