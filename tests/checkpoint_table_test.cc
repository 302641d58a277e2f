// CheckpointTable (roles/checkpoint/table.h) on checkpoints of tables with
// rows on disk, written with the server's own pieces: every server's rows,
// in memory and on disk, come back once each in id order with their values
// (export) and by id in batches (eval); a shard file whose count of rows on
// disk disagrees with its store, and a damaged store file, are errors naming
// the file; the scratch copy of the stores goes with the reader, also when
// opening fails, and the checkpoint is never changed.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "roles/checkpoint/table.h"
#include "roles/checkpoint/weights.h"
#include "tests/tiered_checkpoint_util.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::TieredCheckpoint;

constexpr int kDim = 4;

// Sets TMPDIR for the scope, where the reader makes its scratch copy.
struct ScopedTmpdir {
  explicit ScopedTmpdir(const std::string& dir) {
    const char* old = std::getenv("TMPDIR");
    had_ = old != nullptr;
    if (had_) old_ = old;
    fs::create_directories(dir);
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~ScopedTmpdir() { had_ ? (void)::setenv("TMPDIR", old_.c_str(), 1) : (void)::unsetenv("TMPDIR"); }
  bool had_;
  std::string old_;
};

bool Empty(const std::string& dir) { return fs::is_empty(dir); }

// Reads the checkpoint back and compares it with `values`.
void ReadBack(const std::string& ckpt, const std::string& tmp,
              std::map<int64_t, std::vector<float>>& values) {
  auto weights = CheckpointWeights::Open(ckpt);
  REQUIRE_MESSAGE(weights.ok(), weights.status().message());
  CHECK_FALSE(Empty(tmp));  // the stores' scratch copy
  auto table = (*weights)->Table((*weights)->layout().tables[0]);
  REQUIRE_MESSAGE(table.ok(), table.status().message());
  CHECK(table->rows() == 5000);
  std::vector<int64_t> ids;
  int64_t wrong = 0;
  Status st = table->ForEachRow([&](int64_t id, const float* row) {
    ids.push_back(id);
    if (std::vector<float>(row, row + kDim) != values[id]) ++wrong;
    return Status::OK();
  });
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(ids.size() == values.size());
  CHECK(std::is_sorted(ids.begin(), ids.end()));
  CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
  CHECK(wrong == 0);

  // By id, as eval asks: the first ids (the oldest: on disk), the last (in
  // memory) and ids the checkpoint lacks.
  std::vector<int64_t> ask = {ids[0], ids[1], ids[2500], ids.back(), -5, 1 + ids.back()};
  std::vector<float> out(ask.size() * kDim, -1.0f);
  std::vector<char> found;
  st = table->Gather(ask.data(), ask.size(), out.data(), &found);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(found == std::vector<char>{1, 1, 1, 1, 0, 0});
  for (size_t i = 0; i < 4; ++i)
    CHECK(std::vector<float>(&out[i * kDim], &out[(i + 1) * kDim]) == values[ask[i]]);
  CHECK(out[4 * kDim] == -1.0f);  // untouched
}

TEST_CASE("every server's rows, in memory and on disk, come back once in id order") {
  TempDir dir;
  ScopedTmpdir tmp(dir / "tmp");
  std::map<int64_t, std::vector<float>> values;
  testing::WriteTieredCheckpoint(dir / "ckpt", TieredCheckpoint{2, 5000, 64, kDim}, &values);
  REQUIRE(values.size() == 5000);
  ReadBack(dir / "ckpt", dir / "tmp", values);
  CHECK(Empty(dir / "tmp"));
}

TEST_CASE("a shard file that counts other rows on disk than its store holds is named") {
  TempDir dir;
  ScopedTmpdir tmp(dir / "tmp");
  for (int64_t error : {1, -1}) {
    const std::string ckpt = dir / ("ckpt" + std::to_string(error));
    testing::WriteTieredCheckpoint(ckpt, TieredCheckpoint{1, 3000, 32, kDim, error});
    auto weights = CheckpointWeights::Open(ckpt);
    REQUIRE_MESSAGE(weights.ok(), weights.status().message());
    auto table = (*weights)->Table((*weights)->layout().tables[0]);
    REQUIRE_MESSAGE(table.ok(), table.status().message());
    int64_t calls = 0;
    Status st = table->ForEachRow([&](int64_t, const float*) {
      ++calls;
      return Status::OK();
    });
    REQUIRE_FALSE(st.ok());
    MESSAGE(st.message());
    CHECK(st.message().find("server-0.ckpt: table 'emb': its store checkpoint holds") !=
          std::string::npos);
    CHECK(calls <= table->rows());  // never more than the file promised
  }
}

TEST_CASE("a damaged store file fails opening, naming it, and leaves no scratch") {
  TempDir dir;
  ScopedTmpdir tmp(dir / "tmp");
  testing::WriteTieredCheckpoint(dir / "ckpt", TieredCheckpoint{2, 4000, 32, kDim});
  // Server 1's: server 0's store is restored into scratch before it is read.
  const std::string store = CheckpointStepDir(dir / "ckpt", 1) + "/" + StoreCheckpointDirName(1);
  std::string sst;
  for (const auto& entry : fs::directory_iterator(store))
    if (entry.path().extension() == ".sst") sst = entry.path().string();
  REQUIRE_FALSE(sst.empty());
  {
    std::fstream f(sst, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(fs::file_size(sst) / 2);
    f.seekg(middle);
    const char byte = static_cast<char>(f.get());
    f.seekp(middle);
    f.put(static_cast<char>(byte ^ 0x5a));
  }
  auto weights = CheckpointWeights::Open(dir / "ckpt");
  REQUIRE_FALSE(weights.ok());
  CHECK(weights.status().message().find(fs::path(sst).filename().string() +
                                        ": checksum mismatch") != std::string::npos);
  CHECK(Empty(dir / "tmp"));
}

}  // namespace
}  // namespace pstrain
