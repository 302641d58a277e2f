// Moving embedding-table rows between servers while the job runs
// (ServerRows::TakeRows, PutRows and Digest, roles/server/table_rows.h; the
// wire format of roles/placement/row_move_codec.h). A share trained for a
// while gives the rows of every third id to a fresh share: the digests of
// the two add up to the whole's, every row is in exactly one of them with
// the same bytes, and training both on from there (idle-row eviction
// included) computes, bit for bit, what a share that never moved does. In
// memory and tiered (most rows on disk, with and without the store's
// recency index), with Adagrad and Adam. An id already held is refused,
// changing nothing. The rows travel checked whole.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "embedding/row_store.h"
#include "embedding/tiered_table.h"
#include "roles/placement/row_move_codec.h"
#include "roles/placement/server_tables.h"
#include "roles/server/table_host.h"
#include "roles/server/table_rows.h"
#include "src/common/random.h"
#include "tests/test_util.h"
#include "tests/tiered_test_util.h"

namespace pstrain {
namespace {

using testing::TempDir;
using testing::TierOptions;

constexpr int64_t kIds = 600;    // ids drawn from [0, kIds)
constexpr int64_t kBudget = 16;  // rows in memory, tiered: most are on disk
constexpr int64_t kEvictAfter = 6;

bool Moves(int64_t id) { return id % 3 == 0; }

// One server's share of table "emb": its store (when tiered) and its rows.
struct Share {
  std::unique_ptr<RowStore> store;  // outlives rows
  std::unique_ptr<ServerRows> rows;
};

Share MakeShare(const ServerTable& spec, const std::string& dir) {
  Share share;
  if (spec.memory_rows > 0) {
    auto store = RowStore::Open(dir);
    REQUIRE_MESSAGE(store.ok(), store.status().ToString());
    share.store = std::move(store).value();
  }
  auto rows = ServerRows::Create(spec, share.store.get());
  REQUIRE_MESSAGE(rows.ok(), rows.status().ToString());
  share.rows = std::make_unique<ServerRows>(std::move(rows).value());
  return share;
}

RowsDigest DigestOf(const ServerRows& rows) {
  auto digest = rows.Digest();
  REQUIRE_MESSAGE(digest.ok(), digest.status().ToString());
  return *digest;
}

// The ids a step pulls, with repeats, skewed toward small ids so that some
// rows stay hot while others idle (and are evicted, or go to disk).
std::vector<int64_t> Draws(int64_t step) {
  Rng rng(StreamSeed(7, static_cast<uint64_t>(step)));
  std::vector<int64_t> ids(48);
  for (int64_t& id : ids) {
    const double u = rng.Uniform();
    id = static_cast<int64_t>(static_cast<double>(kIds) * u * u);
  }
  return ids;
}

// The positions of `ids` that `owner` gives to share s.
std::vector<size_t> Positions(const std::vector<int64_t>& ids,
                              const std::function<size_t(int64_t)>& owner, size_t s) {
  std::vector<size_t> at;
  for (size_t i = 0; i < ids.size(); ++i)
    if (owner(ids[i]) == s) at.push_back(i);
  return at;
}

// One step as servers see it, each id on the share `owner` names: a pull of
// the step's draws, a push of each unique id once (gradients a function of
// (step, id)), then idle rows evicted. Returns what the pull read.
std::vector<float> Step(const std::vector<ServerRows*>& shares,
                        const std::function<size_t(int64_t)>& owner, int64_t step) {
  const auto dim = static_cast<size_t>(shares[0]->options().dim);
  const std::vector<int64_t> draws = Draws(step);
  std::set<int64_t> unique_set(draws.begin(), draws.end());
  const std::vector<int64_t> unique(unique_set.begin(), unique_set.end());
  std::vector<float> pulled(draws.size() * dim), grads(unique.size() * dim);
  for (size_t i = 0; i < unique.size(); ++i) {
    Rng rng(StreamSeed(static_cast<uint64_t>(step), static_cast<uint64_t>(unique[i])));
    for (size_t k = 0; k < dim; ++k) grads[i * dim + k] = static_cast<float>(rng.Normal()) * 0.1f;
  }
  for (size_t s = 0; s < shares.size(); ++s) {
    std::vector<int64_t> ids, push_ids;
    std::vector<float> out, push;
    for (size_t i : Positions(draws, owner, s)) ids.push_back(draws[i]);
    out.resize(ids.size() * dim);
    Status st = shares[s]->Lookup(ids.data(), ids.size(), out.data(), step);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    const std::vector<size_t> at = Positions(draws, owner, s);
    for (size_t j = 0; j < at.size(); ++j)
      std::copy_n(out.begin() + j * dim, dim, pulled.begin() + at[j] * dim);
    for (size_t i : Positions(unique, owner, s)) {
      push_ids.push_back(unique[i]);
      push.insert(push.end(), grads.begin() + i * dim, grads.begin() + (i + 1) * dim);
    }
    st = shares[s]->ApplyGradients(push_ids.data(), push.data(), push_ids.size(), step);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    REQUIRE(shares[s]->EvictUntouched(step).ok());
  }
  return pulled;
}

// Bit for bit: values, slots, last-touched step, update count.
void CheckSameRow(const std::optional<TieredTable::Row>& got,
                  const std::optional<TieredTable::Row>& want, int64_t id) {
  INFO("id " << id);
  REQUIRE(got.has_value() == want.has_value());
  if (!want) return;
  REQUIRE(got->values.size() == want->values.size());
  REQUIRE(got->slots.size() == want->slots.size());
  CHECK(std::memcmp(got->values.data(), want->values.data(), want->values.size() * sizeof(float)) ==
        0);
  CHECK(std::memcmp(got->slots.data(), want->slots.data(), want->slots.size() * sizeof(float)) ==
        0);
  CHECK(got->last_touched == want->last_touched);
  CHECK(got->updates == want->updates);
}

std::optional<TieredTable::Row> FindRow(const ServerRows& rows, int64_t id) {
  auto found = rows.Find(id);
  REQUIRE_MESSAGE(found.ok(), found.status().ToString());
  return *found;
}

// Every id's row is on the share the move gives it, as `whole` holds it,
// and not on the other.
void CheckSplit(const ServerRows& stays, const ServerRows& moved, const ServerRows& whole) {
  for (int64_t id = 0; id < kIds; ++id) {
    const std::optional<TieredTable::Row> want = FindRow(whole, id);
    CheckSameRow(FindRow(Moves(id) ? moved : stays, id), want, id);
    CHECK_FALSE(FindRow(Moves(id) ? stays : moved, id).has_value());
  }
  RowsDigest sum = DigestOf(stays);
  sum += DigestOf(moved);
  CHECK(sum == DigestOf(whole));
}

void MoveAndTrainOn(const ServerTable& spec) {
  TempDir tmp;
  Share split = MakeShare(spec, tmp / "split"), whole = MakeShare(spec, tmp / "whole");
  const auto one = [](int64_t) { return size_t{0}; };
  for (int64_t step = 1; step <= 20; ++step) {
    const std::vector<float> a = Step({split.rows.get()}, one, step);
    const std::vector<float> b = Step({whole.rows.get()}, one, step);
    REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  }
  const RowsDigest before = DigestOf(*split.rows);
  REQUIRE(before == DigestOf(*whole.rows));
  REQUIRE(before.rows > kBudget * 4);
  if (spec.options.evict_after_steps > 0) REQUIRE(split.rows->counters().evictions > 0);

  Share joined = MakeShare(spec, tmp / "joined");
  auto taken = split.rows->TakeRows(Moves);
  REQUIRE_MESSAGE(taken.ok(), taken.status().ToString());
  CHECK(taken->size() > 10);
  for (int64_t id : taken->ids) CHECK(Moves(id));
  const Status put = joined.rows->PutRows(*taken);
  REQUIRE_MESSAGE(put.ok(), put.ToString());
  CheckSplit(*split.rows, *joined.rows, *whole.rows);
  CHECK(split.rows->counters().rows + joined.rows->counters().rows == before.rows);

  const auto moved = [](int64_t id) { return size_t{Moves(id) ? 1u : 0u}; };
  for (int64_t step = 21; step <= 40; ++step) {
    const std::vector<float> a = Step({split.rows.get(), joined.rows.get()}, moved, step);
    const std::vector<float> b = Step({whole.rows.get()}, one, step);
    REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  }
  CheckSplit(*split.rows, *joined.rows, *whole.rows);
}

ServerTable Spec(OptimizerType optimizer, int64_t memory_rows, int64_t evict_after_steps) {
  ServerTable spec;
  spec.options = TierOptions(optimizer);
  spec.options.evict_after_steps = evict_after_steps;
  spec.memory_rows = memory_rows;
  return spec;
}

TEST_CASE("rows moved to another share train on as if they had never moved") {
  for (OptimizerType optimizer : {OptimizerType::kAdagrad, OptimizerType::kAdam}) {
    // Tiered without eviction keeps stale disk copies of rows read back;
    // with it, a recency index on disk.
    for (int64_t evict : {int64_t{0}, kEvictAfter}) {
      for (int64_t memory_rows : {int64_t{0}, kBudget}) {
        CAPTURE(static_cast<int>(optimizer));
        CAPTURE(evict);
        CAPTURE(memory_rows);
        MoveAndTrainOn(Spec(optimizer, memory_rows, evict));
      }
    }
  }
}

// Rows of `spec`'s shape: ids, last-touched steps, values i + id.
RowBatch Rows(const ServerTable& spec, const std::vector<int64_t>& ids,
              const std::vector<int64_t>& touched) {
  const size_t floats =
      static_cast<size_t>(spec.options.dim) *
      (1 +
       static_cast<size_t>(SparseOptimizer(spec.options.optimizer, spec.options.dim).num_slots()));
  RowBatch rows(floats);
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<float> data(floats);
    for (size_t k = 0; k < floats; ++k) data[k] = static_cast<float>(k) + ids[i];
    rows.Add(ids[i], data.data(), touched[i], 3);
  }
  return rows;
}

TEST_CASE("a tiered share keeps its budget: the least recently touched rows go to disk") {
  TempDir tmp;
  const ServerTable spec = Spec(OptimizerType::kAdam, 4, 0);
  auto store = RowStore::Open(tmp / "store");
  REQUIRE(store.ok());
  auto table = TieredTable::Create(spec.options, spec.memory_rows, store->get());
  REQUIRE(table.ok());
  std::vector<float> out(2 * spec.options.dim);
  const int64_t own[] = {100, 101};
  REQUIRE(table->Lookup(own, 2, out.data(), 5).ok());
  REQUIRE(table->PutRows(Rows(spec, {1, 8, 2, 9, 3, 7}, {1, 8, 2, 9, 3, 7})).ok());
  // Memory holds 4: the rows of steps 7, 8, 9 and one of step 5.
  const TieredTableCounters tiers = table->tier_counters();
  CHECK(tiers.resident == 4);
  CHECK(tiers.on_disk == 4);
  std::string bytes;
  table->Serialize(&bytes);
  auto header = TieredTable::ReadSerializedHeader("emb", bytes.data(), bytes.size());
  REQUIRE(header.ok());
  auto resident = SparseTable::ReadSerializedRows("emb", bytes.data() + header->rows_at,
                                                  bytes.size() - header->rows_at);
  REQUIRE(resident.ok());
  std::set<int64_t> in_memory;
  for (const auto& [id, floats] : resident->rows) in_memory.insert(id);
  CHECK(in_memory.count(7) == 1);
  CHECK(in_memory.count(8) == 1);
  CHECK(in_memory.count(9) == 1);
  CHECK(in_memory.count(100) + in_memory.count(101) == 1);
  auto row = table->Find(2);
  REQUIRE(row.ok());
  REQUIRE(row->has_value());
  CHECK((*row)->last_touched == 2);
  CHECK((*row)->updates == 3);
  CHECK((*row)->values[1] == 3.0f);

  // Taken from both tiers; the rest stays where it was.
  auto taken = table->TakeRows([](int64_t id) { return id == 1 || id == 9 || id == 100; });
  REQUIRE(taken.ok());
  CHECK(taken->size() == 3);
  CHECK(table->counters().rows == 5);
  CHECK(table->tier_counters().resident + table->tier_counters().on_disk == 5);
  for (int64_t id : {1, 9, 100}) CHECK_FALSE(table->Find(id)->has_value());
  for (int64_t id : {2, 3, 7, 8, 101}) CHECK(table->Find(id)->has_value());
}

TEST_CASE("an in-memory share past max_rows evicts the least recently touched") {
  ServerTable spec = Spec(OptimizerType::kAdagrad, 0, 0);
  spec.options.max_rows = 4;
  Share share = MakeShare(spec, "");
  std::vector<float> out(2 * spec.options.dim);
  const int64_t own[] = {100, 101};
  REQUIRE(share.rows->Lookup(own, 2, out.data(), 5).ok());
  REQUIRE(share.rows->PutRows(Rows(spec, {1, 8, 2, 9}, {1, 8, 2, 9})).ok());
  CHECK(share.rows->counters().rows == 4);
  CHECK(share.rows->counters().capacity_evictions == 2);
  for (int64_t id : {1, 2}) CHECK_FALSE(FindRow(*share.rows, id).has_value());
  for (int64_t id : {8, 9, 100, 101}) CHECK(FindRow(*share.rows, id).has_value());
}

TEST_CASE("rows a share holds already are refused, changing nothing") {
  for (int64_t memory_rows : {int64_t{0}, int64_t{2}}) {
    CAPTURE(memory_rows);
    TempDir tmp;
    const ServerTable spec = Spec(OptimizerType::kAdagrad, memory_rows, 0);
    Share share = MakeShare(spec, tmp / "store");
    std::vector<float> out(6 * spec.options.dim);
    const int64_t own[] = {1, 2, 3, 4, 5, 6};
    REQUIRE(share.rows->Lookup(own, 6, out.data(), 1).ok());
    REQUIRE(share.rows->Lookup(own, 1, out.data(), 2).ok());  // tiered: some rows go to disk
    const RowsDigest before = DigestOf(*share.rows);
    for (int64_t held : own) {
      CAPTURE(held);
      const Status st = share.rows->PutRows(Rows(spec, {50, held}, {1, 1}));
      CHECK(st.code() == StatusCode::kInvalidArgument);
      CHECK(st.message().find("id " + std::to_string(held) + " already has a row") !=
            std::string::npos);
    }
    RowBatch twice = Rows(spec, {50, 51, 50}, {1, 1, 1});
    CHECK(share.rows->PutRows(twice).message().find("id 50 is in the batch twice") !=
          std::string::npos);
    RowBatch narrow(spec.options.dim);
    narrow.Add(50, out.data(), 1, 0);
    CHECK(share.rows->PutRows(narrow).code() == StatusCode::kInvalidArgument);
    RowBatch negative = Rows(spec, {-4}, {1});
    CHECK(share.rows->PutRows(negative).message().find("negative") != std::string::npos);
    CHECK(DigestOf(*share.rows) == before);
    CHECK_FALSE(FindRow(*share.rows, 50).has_value());
  }
}

std::vector<MovedRows> TwoTables() {
  ServerTable adam = Spec(OptimizerType::kAdam, 0, 0);
  MovedRows a{"emb", 8, 2, 41, Rows(adam, {3, 9, 0}, {4, 7, 0}), {}};
  a.rows.data[5] = -0.0f;
  a.rows.data[6] = std::nanf("0x1234");  // carried as bits, not as numbers
  a.gone = {12, 15};                     // rows copied ahead that no longer exist
  MovedRows b{"user.weight", 3, 0, 0, RowBatch(3), {}};
  return {a, b};
}

TEST_CASE("moved rows travel bit for bit, and damaged bytes are refused") {
  const std::vector<MovedRows> tables = TwoTables();
  std::string bytes;
  EncodeMovedRows(tables, &bytes);
  auto back = DecodeMovedRows(bytes.data(), bytes.size());
  REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  REQUIRE(back->size() == 2);
  for (size_t t = 0; t < 2; ++t) {
    const MovedRows &got = (*back)[t], &want = tables[t];
    CHECK(got.table == want.table);
    CHECK(got.dim == want.dim);
    CHECK(got.slots == want.slots);
    CHECK(got.table_updates == want.table_updates);
    CHECK(got.rows.floats == want.rows.floats);
    CHECK(got.rows.ids == want.rows.ids);
    CHECK(got.rows.last_touched == want.rows.last_touched);
    CHECK(got.rows.updates == want.rows.updates);
    CHECK(got.gone == want.gone);
    REQUIRE(got.rows.data.size() == want.rows.data.size());
    CHECK(std::memcmp(got.rows.data.data(), want.rows.data.data(),
                      want.rows.data.size() * sizeof(float)) == 0);
  }
  std::string again;
  EncodeMovedRows(*back, &again);
  CHECK(again == bytes);

  for (size_t n = 0; n < bytes.size(); ++n) {
    auto cut = DecodeMovedRows(bytes.data(), n);
    REQUIRE_FALSE(cut.ok());
    CHECK(cut.status().code() == StatusCode::kInvalidArgument);
  }
  // Field offsets: header 12; table "emb": name 4 + 3, dim 4, slots 4,
  // table updates 8, rows 8, then 3 rows of 3 x 8 and 24 floats, gone 8.
  const auto refused = [&](size_t at, const std::string& with, const std::string& why) {
    std::string damaged = bytes;
    damaged.replace(at, with.size(), with);
    auto got = DecodeMovedRows(damaged.data(), damaged.size());
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().message().find(why) != std::string::npos);
    CHECK(got.status().message().find('\n') == std::string::npos);
  };
  const auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  const auto i64 = [](int64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  refused(0, "PSRX", "no PSRM header");
  refused(4, u32(3), "format 3");
  refused(8, u32(5000), "no count of tables");
  refused(8, u32(20), "20 tables do not fit");
  refused(16, "e\nb", "not plain text");
  refused(19, u32(0), "table 'emb': dim 0");
  refused(23, u32(9), "9 optimizer slots");
  refused(27, i64(-2), "-2 table updates");
  refused(35, i64(int64_t{1} << 40), "rows of 120 bytes do not fit");
  refused(43, i64(-3), "a negative id -3");
  refused(43 + 3 * 8 + 8, i64(-1), "row 9 has a negative step");
  constexpr size_t kGone = 43 + 3 * (3 * 8 + 24 * 4);
  refused(kGone, i64(int64_t{1} << 40), "gone ids do not fit");
  refused(kGone + 8, i64(-4), "a negative gone id -4");
  std::string tail = bytes + "x";
  CHECK(DecodeMovedRows(tail.data(), tail.size()).status().message().find("1 bytes after") !=
        std::string::npos);
  std::vector<MovedRows> same_name = tables;
  same_name[1].table = "emb";
  std::string dup;
  EncodeMovedRows(same_name, &dup);
  CHECK(DecodeMovedRows(dup.data(), dup.size()).status().message().find("twice") !=
        std::string::npos);
}

// A server that took another's rank in a live change keeps the store
// directory named after its old rank; a server joining as that rank on the
// same disk must not wipe it (RocksDB's lock refuses), and takes the next
// name instead.
TEST_CASE("a table store directory in use is not taken over by another server") {
  TempDir tmp;
  Config config = OneTableConfig("emb", 4);
  config.parameters[0].server_cache_rows = 8;
  config.train.store_dir = tmp.path();
  auto sink = std::make_shared<testing::CaptureSink>();
  auto first = TableHost::Create(config, 1, 0, 2, testing::CaptureLogger("first", sink));
  REQUIRE_MESSAGE(first.ok(), first.status().message());
  auto second = TableHost::Create(config, 1, 0, 2, testing::CaptureLogger("second", sink));
  REQUIRE_MESSAGE(second.ok(), second.status().message());
  CHECK(std::filesystem::exists(ServerStoreDir(config, 0) + "/CURRENT"));  // not wiped
  CHECK(std::filesystem::exists(ServerStoreDir(config, 0) + ".2/CURRENT"));
}

}  // namespace
}  // namespace pstrain
