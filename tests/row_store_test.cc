// Tests for embedding/row_store: rows written come back bit for bit and in id
// order, the recency index drops the oldest rows, checkpoints restore, and a
// store that is missing, read-only, full or damaged gives a one-line error
// and loses nothing the caller had.
#include "embedding/row_store.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "tests/tiered_test_util.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::TmpfsMount;

constexpr char kFull[] = "row_store_full";
const bool kSuitesRegistered = testing::SuiteNeeds(kFull, testing::CanMountTmpfs);

constexpr size_t kFloats = 12;

std::unique_ptr<RowStore> OpenStore(const std::string& dir, const RowStoreOptions& options = {}) {
  auto store = RowStore::Open(dir, options);
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  return std::move(store).value();
}

RowStore::TableId OpenTable(RowStore& store, bool by_recency = false, size_t floats = kFloats) {
  auto table = store.OpenTable("emb", floats, by_recency, false);
  REQUIRE_MESSAGE(table.ok(), table.status().ToString());
  return *table;
}

// Rows for ids[i] with float bits that a lossy path would change: negative
// zero, a denormal, the largest float.
RowBatch Rows(const std::vector<int64_t>& ids, int64_t step, size_t floats = kFloats) {
  RowBatch rows(floats);
  for (int64_t id : ids) {
    std::vector<float> v(floats);
    for (size_t k = 0; k < floats; ++k) v[k] = static_cast<float>(id) * 0.001f - k;
    v[0] = -0.0f;
    v[1] = std::numeric_limits<float>::denorm_min();
    v[2] = std::numeric_limits<float>::max();
    rows.Add(id, v.data(), step + id % 7, id % 5);
  }
  return rows;
}

void ExpectSameRow(const RowBatch& a, size_t i, const RowBatch& b, size_t j) {
  CHECK(a.ids[i] == b.ids[j]);
  CHECK(std::memcmp(a.row(i), b.row(j), a.floats * sizeof(float)) == 0);
  CHECK(a.last_touched[i] == b.last_touched[j]);
  CHECK(a.updates[i] == b.updates[j]);
}

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> ids;
  for (int64_t id = from; id < to; ++id) ids.push_back(id);
  return ids;
}

TEST_CASE(
    "rows written come back bit for bit; missing ids are left out; iteration is in id order") {
  TempDir tmp;
  auto store = OpenStore(tmp / "store");
  const RowStore::TableId t = OpenTable(*store);
  // Ids across byte boundaries, written out of order.
  const std::vector<int64_t> ids = {70000, 3, 256, 255, int64_t{1} << 40, 0, 65536};
  const RowBatch rows = Rows(ids, 10);
  REQUIRE(store->Write(t, rows, {}).ok());

  const std::vector<int64_t> wanted = {256, 9, 0, int64_t{1} << 40, 12345};
  RowBatch found(kFloats);
  REQUIRE(store->MultiGet(t, wanted.data(), wanted.size(), &found).ok());
  REQUIRE(found.size() == 3);
  for (size_t j = 0; j < found.size(); ++j)
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == found.ids[j]) ExpectSameRow(rows, i, found, j);

  std::vector<int64_t> order;
  auto it = store->NewIterator(t);
  for (; it->Valid(); it->Next()) {
    order.push_back(it->id());
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == it->id()) {
        CHECK(std::memcmp(it->data(), rows.row(i), kFloats * sizeof(float)) == 0);
        CHECK(it->last_touched() == rows.last_touched[i]);
        CHECK(it->updates() == rows.updates[i]);
      }
  }
  CHECK(it->status().ok());
  std::vector<int64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  CHECK(order == sorted);

  // Erased rows are gone; a put in the same batch wins over nothing else.
  REQUIRE(store->Write(t, Rows({5}, 1), {{3, 0}, {256, 0}}).ok());
  found.Clear();
  const std::vector<int64_t> again = {3, 256, 5, 255};
  REQUIRE(store->MultiGet(t, again.data(), again.size(), &found).ok());
  CHECK(found.ids == std::vector<int64_t>{5, 255});
}

TEST_CASE("a fresh store holds no rows of the one before it in the same directory") {
  TempDir tmp;
  {
    auto store = OpenStore(tmp / "store");
    REQUIRE(store->Write(OpenTable(*store), Rows(Range(0, 100), 1), {}).ok());
    REQUIRE(store->Flush().ok());
  }
  auto store = OpenStore(tmp / "store");
  const RowStore::TableId t = OpenTable(*store);
  RowBatch found(kFloats);
  const std::vector<int64_t> ids = Range(0, 100);
  REQUIRE(store->MultiGet(t, ids.data(), ids.size(), &found).ok());
  CHECK(found.empty());
}

TEST_CASE("a dropped table is made anew, empty, and the other tables keep their rows and ids") {
  TempDir tmp;
  auto store = OpenStore(tmp / "store");
  auto first = store->OpenTable("a", kFloats, true, true);
  auto second = store->OpenTable("b", kFloats, false, true);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  REQUIRE(store->Write(*first, Rows(Range(0, 50), 1), {}).ok());
  REQUIRE(store->Write(*second, Rows(Range(0, 50), 1), {}).ok());
  CHECK(store->OpenTable("a", kFloats, true, true).status().message().find("opened twice") !=
        std::string::npos);
  REQUIRE(store->DropTable("a").ok());
  auto again = store->OpenTable("a", kFloats, true, true);
  REQUIRE_MESSAGE(again.ok(), again.status().ToString());
  const std::vector<int64_t> ids = Range(0, 50);
  RowBatch found(kFloats);
  REQUIRE(store->MultiGet(*again, ids.data(), ids.size(), &found).ok());
  CHECK(found.empty());
  REQUIRE(store->MultiGet(*second, ids.data(), ids.size(), &found).ok());
  CHECK(found.size() == 50);
  CHECK(store->DropTable("none").ok());  // nothing open by that name
}

TEST_CASE("a negative id is refused, not read (its key would sort out of order)") {
  TempDir tmp;
  auto store = OpenStore(tmp / "store");
  const RowStore::TableId t = OpenTable(*store);
  REQUIRE(store->Write(t, Rows(Range(0, 10), 1), {}).ok());
  RowBatch found(kFloats);
  const std::vector<int64_t> ids = {3, -7, 5};
  Status st = store->MultiGet(t, ids.data(), ids.size(), &found);
  CHECK(st.message().find("row -7 of table") != std::string::npos);
  CHECK(found.empty());
}

TEST_CASE("EraseOldest drops the least recently touched rows first, and only those") {
  TempDir tmp;
  auto store = OpenStore(tmp / "store");
  const RowStore::TableId t = OpenTable(*store, true);
  RowBatch rows(kFloats);
  const std::vector<float> v(kFloats, 1.0f);
  for (int64_t id = 0; id < 100; ++id) rows.Add(id, v.data(), 1000 - id, 0);  // id 99 oldest
  REQUIRE(store->Write(t, rows, {}).ok());
  // A row read back and erased leaves its recency entry with it.
  REQUIRE(store->Write(t, RowBatch(kFloats), {{99, 901}}).ok());

  auto erased = store->EraseOldest(t, 905, 1000);  // touched 902..904: ids 98, 97, 96
  REQUIRE(erased.ok());
  CHECK(*erased == 3);
  erased = store->EraseOldest(t, std::numeric_limits<int64_t>::max(), 2);  // ids 95, 94
  REQUIRE(erased.ok());
  CHECK(*erased == 2);
  RowBatch found(kFloats);
  const std::vector<int64_t> ids = Range(0, 100);
  REQUIRE(store->MultiGet(t, ids.data(), ids.size(), &found).ok());
  CHECK(found.ids == Range(0, 94));

  const RowStore::TableId plain = *store->OpenTable("plain", kFloats, false, true);
  CHECK(store->EraseOldest(plain, 0, 1).status().message().find("no recency") != std::string::npos);
}

TEST_CASE("a checkpoint restores every table as it was, and stays as it was") {
  TempDir tmp;
  auto store = OpenStore(tmp / "store");
  const RowStore::TableId t = OpenTable(*store);
  const RowBatch rows = Rows(Range(0, 500), 3);
  REQUIRE(store->Write(t, rows, {}).ok());
  REQUIRE(store->Checkpoint(tmp / "ckpt").ok());
  REQUIRE(store->Write(t, Rows(Range(500, 600), 4), {{0, 0}}).ok());  // after: not in it

  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    auto restored = RowStore::Restore(tmp / "ckpt", tmp / "restored");
    REQUIRE_MESSAGE(restored.ok(), restored.status().ToString());
    auto table = (*restored)->OpenTable("emb", kFloats, false, false);
    REQUIRE(table.ok());
    RowBatch found(kFloats);
    const std::vector<int64_t> ids = Range(0, 600);
    REQUIRE((*restored)->MultiGet(*table, ids.data(), ids.size(), &found).ok());
    REQUIRE(found.size() == 500);
    for (size_t i = 0; i < found.size(); ++i) ExpectSameRow(rows, i, found, i);
    // Changing the restored store must not change the checkpoint.
    REQUIRE((*restored)->Write(*table, Rows(Range(0, 500), 99), {}).ok());
    REQUIRE((*restored)->Flush().ok());
  }
  CHECK(store->OpenTable("emb", kFloats, false, true).status().message().find("twice") !=
        std::string::npos);
}

TEST_CASE("a store whose directory cannot be made is a one-line error naming it") {
  TempDir tmp;
  auto missing = RowStore::Open(tmp / "no/such/parent");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find(tmp / "no/such/parent") != std::string::npos);
  CHECK(missing.status().message().find("parent directory") != std::string::npos);

  std::ofstream(tmp / "file") << "x";
  auto file = RowStore::Open(tmp / "file");
  REQUIRE_FALSE(file.ok());
  CHECK(file.status().message().find("not a directory") != std::string::npos);
  auto under_file = RowStore::Open(tmp / "file/store");
  REQUIRE_FALSE(under_file.ok());
  CHECK(under_file.status().message().find("parent directory") != std::string::npos);

  auto no_checkpoint = RowStore::Restore(tmp / "no-ckpt", tmp / "store");
  REQUIRE_FALSE(no_checkpoint.ok());
  CHECK(no_checkpoint.status().message().find("no-ckpt") != std::string::npos);
}

TEST_CASE("a damaged record is an error naming the table and the id, and returns nothing") {
  TempDir tmp;
  auto store = OpenStore(tmp / "store");
  const RowStore::TableId t = OpenTable(*store);
  RowBatch rows = Rows({1, 7, 9}, 2);
  rows.row(1)[4] = std::nanf("");
  REQUIRE(store->Write(t, rows, {}).ok());
  RowBatch found(kFloats);
  const std::vector<int64_t> ids = {1, 7, 9};
  const Status st = store->MultiGet(t, ids.data(), ids.size(), &found);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("table 'emb' row 7") != std::string::npos);
  CHECK(st.message().find("not finite") != std::string::npos);
  CHECK(st.message().find(tmp / "store") != std::string::npos);
  CHECK(found.empty());
  auto it = store->NewIterator(t);
  while (it->Valid()) it->Next();
  CHECK(it->status().message().find("row 7") != std::string::npos);

  // Records of another width: a table reopened with another dim.
  REQUIRE(store->Checkpoint(tmp / "ckpt").ok());
  auto restored = RowStore::Restore(tmp / "ckpt", tmp / "restored");
  REQUIRE(restored.ok());
  const RowStore::TableId wide = OpenTable(**restored, false, kFloats + 4);
  RowBatch wide_found(kFloats + 4);
  const Status size = (*restored)->MultiGet(wide, ids.data(), 1, &wide_found);
  CHECK(size.message().find("table 'emb' row 1: record of 64 bytes, expected 80") !=
        std::string::npos);
}

// Flips bytes in the middle of every table file under dir.
int DamageTableFiles(const std::string& dir) {
  int damaged = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".sst") continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    const auto size = static_cast<std::streamoff>(fs::file_size(entry.path()));
    for (std::streamoff at = size / 8; at < size / 2; at += 997) {
      char c;
      f.seekg(at);
      f.get(c);
      f.seekp(at);
      f.put(static_cast<char>(c ^ 0x5a));
    }
    ++damaged;
  }
  return damaged;
}

TEST_CASE("a corrupted table file is a one-line error, never a crash or a wrong row") {
  TempDir tmp;
  {
    auto store = OpenStore(tmp / "store");
    REQUIRE(store->Write(OpenTable(*store), Rows(Range(0, 3000), 1), {}).ok());
    REQUIRE(store->Checkpoint(tmp / "ckpt").ok());
  }
  REQUIRE(DamageTableFiles(tmp / "ckpt") > 0);
  auto restored = RowStore::Restore(tmp / "ckpt", tmp / "restored");
  if (!restored.ok()) {  // found at open: also fine, if it says where
    CHECK(restored.status().message().find(tmp / "restored") != std::string::npos);
    return;
  }
  const RowStore::TableId t = OpenTable(**restored);
  RowBatch found(kFloats);
  const std::vector<int64_t> ids = Range(0, 3000);
  const Status st = (*restored)->MultiGet(t, ids.data(), ids.size(), &found);
  REQUIRE_FALSE(st.ok());
  MESSAGE(st.message());
  CHECK(st.message().find("Corruption") != std::string::npos);
  CHECK(st.message().find("table 'emb'") != std::string::npos);
  CHECK(st.message().find('\n') == std::string::npos);
  CHECK(found.empty());
  auto it = (*restored)->NewIterator(t);
  int64_t rows = 0;
  for (; it->Valid(); it->Next()) ++rows;
  CHECK(rows < 3000);
  CHECK(it->status().message().find("Corruption") != std::string::npos);
}

TEST_CASE("a full disk fails the write that does not fit, names it, and keeps what was written" *
          doctest::test_suite(kFull)) {
  TempDir tmp;
  TmpfsMount disk(tmp / "disk", "1m");
  REQUIRE_MESSAGE(disk.mounted(), disk.error());
  RowStoreOptions options;
  options.write_buffer_bytes = 64 << 10;  // flushes often, so the disk fills soon
  auto store = OpenStore(tmp / "disk/store", options);
  const RowStore::TableId t = OpenTable(*store);
  Status failed;
  int64_t written = 0;
  constexpr int64_t kBatch = 512;
  for (int batch = 0; batch < 2000 && failed.ok(); ++batch) {
    failed = store->Write(t, Rows(Range(written, written + kBatch), batch), {});
    if (failed.ok()) written += kBatch;
  }
  REQUIRE_FALSE(failed.ok());
  MESSAGE(failed.message());
  CHECK(failed.message().find("No space left on device") != std::string::npos);
  CHECK(failed.message().find(tmp / "disk/store") != std::string::npos);
  CHECK(failed.message().find("512 evicted rows of table 'emb'") != std::string::npos);
  // Every row whose write succeeded still reads back.
  RowBatch found(kFloats);
  const std::vector<int64_t> ids = Range(0, written);
  const Status read = store->MultiGet(t, ids.data(), ids.size(), &found);
  REQUIRE_MESSAGE(read.ok(), read.ToString());
  CHECK(static_cast<int64_t>(found.size()) == written);
  CHECK(found.ids == ids);
}

TEST_CASE("a read-only store directory is a one-line error naming it" *
          doctest::test_suite(kFull)) {
  TempDir tmp;
  TmpfsMount disk(tmp / "ro", "64k", true);
  REQUIRE_MESSAGE(disk.mounted(), disk.error());
  auto store = RowStore::Open(tmp / "ro/store");
  REQUIRE_FALSE(store.ok());
  MESSAGE(store.status().message());
  CHECK(store.status().message().find(tmp / "ro/store") != std::string::npos);
  CHECK(store.status().message().find("Read-only file system") != std::string::npos);
}

}  // namespace
}  // namespace pstrain
