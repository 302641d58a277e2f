// Tests for embedding/tiered_table: a table with a memory budget over a row
// store on disk computes what an all-in-memory SparseTable computes, bit for
// bit (values, optimizer slots, update counts, last-touched steps), through
// eviction to disk, checkpoints, idle-row eviction, admission; max_rows
// bounds both tiers; a full disk fails a batch with a clear error and loses
// no row.
#include "embedding/tiered_table.h"

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "embedding/row_init.h"
#include "embedding/row_store.h"
#include "embedding/sparse_table.h"
#include "tests/test_util.h"
#include "tests/tiered_test_util.h"

namespace pstrain {
namespace {

using testing::TempDir;
using testing::TierOptions;
using testing::TmpfsMount;
using testing::ZipfDraws;

constexpr char kFull[] = "tiered_table_full";
const bool kSuitesRegistered = testing::SuiteNeeds(kFull, testing::CanMountTmpfs);

constexpr uint64_t kSeed = 5;
constexpr size_t kDrawsPerStep = 384;

std::unique_ptr<RowStore> OpenStore(const std::string& dir, const RowStoreOptions& options = {}) {
  auto store = RowStore::Open(dir, options);
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  return std::move(store).value();
}

SparseTable MakeReference(const EmbeddingTableOptions& options) {
  auto table = SparseTable::Create(options);
  REQUIRE_MESSAGE(table.ok(), table.status().ToString());
  return std::move(table).value();
}

TieredTable MakeTiered(const EmbeddingTableOptions& options, int64_t budget, RowStore* store) {
  auto table = TieredTable::Create(options, budget, store);
  REQUIRE_MESSAGE(table.ok(), table.status().ToString());
  return std::move(table).value();
}

// One training step on both tables, as a server sees it: a pull of the
// step's draws (with repeats), then a push of each unique id once, plus an id
// nobody looked up (its gradient is dropped). Gradients are a function of
// (step, id). Pulls must agree bit for bit. Returns the ids touched.
std::vector<int64_t> Step(const ZipfDraws& zipf, int64_t step, SparseTable& reference,
                          TieredTable& tiered) {
  const int dim = reference.options().dim;
  const std::vector<int64_t> draws = zipf.Round(kSeed, step, kDrawsPerStep);
  std::vector<float> want(draws.size() * dim), got(draws.size() * dim, -1.0f);
  REQUIRE(reference.Lookup(draws.data(), draws.size(), want.data(), step).ok());
  const Status looked_up = tiered.Lookup(draws.data(), draws.size(), got.data(), step);
  REQUIRE_MESSAGE(looked_up.ok(), looked_up.ToString());
  REQUIRE(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);

  const std::set<int64_t> unique_set(draws.begin(), draws.end());
  std::vector<int64_t> unique(unique_set.begin(), unique_set.end());
  unique.push_back((int64_t{1} << 45) + step);  // never looked up
  std::vector<float> grads(unique.size() * dim);
  for (size_t i = 0; i < unique.size(); ++i) {
    Rng rng(StreamSeed(static_cast<uint64_t>(step), static_cast<uint64_t>(unique[i])));
    for (int k = 0; k < dim; ++k) grads[i * dim + k] = static_cast<float>(rng.Normal()) * 0.1f;
  }
  REQUIRE(reference.ApplyGradients(unique.data(), grads.data(), unique.size(), step).ok());
  const Status pushed = tiered.ApplyGradients(unique.data(), grads.data(), unique.size(), step);
  REQUIRE_MESSAGE(pushed.ok(), pushed.ToString());
  return draws;
}

// Every id's row agrees bit for bit, or both tables lack it; the counters a
// user reads agree. Returns the rows compared.
int64_t ExpectSame(const SparseTable& reference, const TieredTable& tiered,
                   const std::set<int64_t>& ids, bool same_counters = true) {
  const size_t dim = static_cast<size_t>(reference.options().dim);
  const size_t slots = dim * static_cast<size_t>(reference.optimizer().num_slots());
  int64_t rows = 0, mismatches = 0;
  for (int64_t id : ids) {
    const auto want = reference.Find(id);
    const auto got = tiered.Find(id);
    REQUIRE_MESSAGE(got.ok(), got.status().ToString());
    if (want.has_value() != got->has_value()) {
      if (++mismatches <= 3)
        MESSAGE("row " << id << (want ? " is missing" : " should not be there"));
      continue;
    }
    if (!want) continue;
    ++rows;
    const TieredTable::Row& row = **got;
    if (std::memcmp(want->values, row.values.data(), dim * sizeof(float)) != 0 ||
        std::memcmp(want->slots, row.slots.data(), slots * sizeof(float)) != 0 ||
        want->last_touched != row.last_touched || want->updates != row.updates) {
      if (++mismatches <= 3)
        MESSAGE("row " << id << " differs: updates " << want->updates << " vs " << row.updates
                       << ", last touched " << want->last_touched << " vs " << row.last_touched);
    }
  }
  CHECK(mismatches == 0);
  if (!same_counters) return rows;  // counters count since a table was created or restored
  const EmbeddingTableCounters a = reference.counters(), b = tiered.counters();
  CHECK(a.rows == b.rows);
  CHECK(a.admissions == b.admissions);
  CHECK(a.evictions == b.evictions);
  CHECK(a.lookups == b.lookups);
  CHECK(a.dropped_gradients == b.dropped_gradients);
  CHECK(a.pending_ids == b.pending_ids);
  CHECK(reference.table_updates() == tiered.table_updates());
  return rows;
}

struct Case {
  const char* name;
  OptimizerType optimizer;
  int64_t admit_after;
  TierPolicy policy;
};

TEST_CASE("at 10% of rows in memory, a tiered table computes what an all-in-memory one does") {
  for (const Case& c : {Case{"adagrad, lru", OptimizerType::kAdagrad, 0, TierPolicy::kLru},
                        Case{"adagrad, tinylfu", OptimizerType::kAdagrad, 0, TierPolicy::kTinyLfu},
                        Case{"adam, admitted at the 2nd sighting, tinylfu", OptimizerType::kAdam, 2,
                             TierPolicy::kTinyLfu}}) {
    const std::string name = c.name;
    CAPTURE(name);
    TempDir tmp;
    const ZipfDraws zipf(20000, 1.05);
    EmbeddingTableOptions options = TierOptions(c.optimizer);
    options.admit_after = c.admit_after;
    // The budget: 10% of the rows the table ends with.
    int64_t rows_at_end = 0;
    {
      SparseTable dry_run = MakeReference(options);
      std::vector<float> out(kDrawsPerStep * options.dim);
      for (int64_t step = 1; step <= 300; ++step) {
        const std::vector<int64_t> draws = zipf.Round(kSeed, step, kDrawsPerStep);
        REQUIRE(dry_run.Lookup(draws.data(), draws.size(), out.data(), step).ok());
      }
      rows_at_end = static_cast<int64_t>(dry_run.rows());
    }
    auto store = OpenStore(tmp / "store");
    SparseTable reference = MakeReference(options);
    const int64_t budget = rows_at_end / 10;
    auto created = TieredTable::Create(options, budget, store.get(), c.policy);
    REQUIRE(created.ok());
    TieredTable tiered = std::move(created).value();
    std::set<int64_t> seen;
    for (int64_t step = 1; step <= 300; ++step) {
      for (int64_t id : Step(zipf, step, reference, tiered)) seen.insert(id);
      CHECK(tiered.tier_counters().resident <= budget + 2 * static_cast<int64_t>(kDrawsPerStep));
      if (step % 100 == 0) {
        CAPTURE(step);
        const int64_t rows = ExpectSame(reference, tiered, seen);
        MESSAGE(name << " step " << step << ": " << rows << " rows, "
                     << tiered.tier_counters().resident << " in memory, "
                     << tiered.tier_counters().on_disk << " on disk, "
                     << tiered.tier_counters().spilled << " spilled, "
                     << tiered.tier_counters().fetched << " read back");
      }
    }
    // The comparison meant something: most rows live on disk, and rows went
    // there and came back many times.
    const TieredTableCounters moved = tiered.tier_counters();
    CHECK(moved.on_disk > 5 * moved.resident);
    CHECK(moved.fetched > 5000);
  }
}

TEST_CASE("rows stream in id order from both tiers, as the all-in-memory table holds them") {
  TempDir tmp;
  const ZipfDraws zipf(5000, 1.2);
  const EmbeddingTableOptions options = TierOptions(OptimizerType::kAdagrad, 4);
  auto store = OpenStore(tmp / "store");
  SparseTable reference = MakeReference(options);
  TieredTable tiered = MakeTiered(options, 300, store.get());
  for (int64_t step = 1; step <= 60; ++step) Step(zipf, step, reference, tiered);
  REQUIRE(tiered.tier_counters().on_disk > 0);

  std::vector<int64_t> order;
  int64_t mismatches = 0;
  const Status st = tiered.ForEachRow([&](int64_t id, const SparseTable::RowView& row) {
    order.push_back(id);
    const auto want = reference.Find(id);
    if (!want || std::memcmp(want->values, row.values, 4 * sizeof(float)) != 0 ||
        std::memcmp(want->slots, row.slots, 4 * sizeof(float)) != 0 ||
        want->updates != row.updates || want->last_touched != row.last_touched)
      ++mismatches;
    return Status::OK();
  });
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  CHECK(mismatches == 0);
  std::vector<int64_t> ids = reference.Ids();
  std::sort(ids.begin(), ids.end());
  CHECK(order == ids);
  // An error of the callback stops the stream and comes back.
  int calls = 0;
  const Status stopped = tiered.ForEachRow([&](int64_t, const SparseTable::RowView&) {
    return ++calls == 3 ? Internal("stop here") : Status::OK();
  });
  CHECK(stopped.message() == "stop here");
  CHECK(calls == 3);
}

TEST_CASE("a checkpoint of the store and the table resumes bit for bit, as often as asked") {
  TempDir tmp;
  const ZipfDraws zipf(8000, 1.05);
  const EmbeddingTableOptions options = TierOptions(OptimizerType::kAdam);
  const int64_t budget = 800;
  auto store = OpenStore(tmp / "store");
  SparseTable reference = MakeReference(options);
  TieredTable tiered = MakeTiered(options, budget, store.get());
  std::set<int64_t> seen;
  for (int64_t step = 1; step <= 80; ++step)
    for (int64_t id : Step(zipf, step, reference, tiered)) seen.insert(id);
  // The checkpoint: the store, then the table, with no batch between.
  REQUIRE(store->Checkpoint(tmp / "ckpt").ok());
  std::string saved, reference_saved;
  tiered.Serialize(&saved);
  reference.Serialize(&reference_saved);
  // The job goes on past it (these steps are lost by the "crash").
  for (int64_t step = 81; step <= 120; ++step)
    for (int64_t id : Step(zipf, step, reference, tiered)) seen.insert(id);

  for (int resume = 0; resume < 2; ++resume) {
    CAPTURE(resume);
    auto restored_store = RowStore::Restore(tmp / "ckpt", tmp / "resumed");
    REQUIRE_MESSAGE(restored_store.ok(), restored_store.status().ToString());
    auto restored = TieredTable::Deserialize(options, budget, restored_store->get(), saved.data(),
                                             saved.size());
    REQUIRE_MESSAGE(restored.ok(), restored.status().ToString());
    auto reference_restored =
        SparseTable::Deserialize(options, reference_saved.data(), reference_saved.size());
    REQUIRE(reference_restored.ok());
    CHECK(restored->tier_counters().on_disk > 0);
    ExpectSame(*reference_restored, *restored, seen);
    for (int64_t step = 81; step <= 120; ++step) Step(zipf, step, *reference_restored, *restored);
    ExpectSame(*reference_restored, *restored, seen);
    ExpectSame(reference, *restored, seen, false);  // where the uninterrupted job is
  }

  // Damaged bytes, or rows promised on disk that the store lacks.
  std::string damaged = saved;
  damaged[12] ^= 1;
  auto store2 = OpenStore(tmp / "empty");
  auto bad =
      TieredTable::Deserialize(options, budget, store2.get(), damaged.data(), damaged.size());
  CHECK(bad.status().message().find("checksum") != std::string::npos);
  auto empty = TieredTable::Deserialize(options, budget, store2.get(), saved.data(), saved.size());
  CHECK(empty.status().message().find("should be on disk") != std::string::npos);
}

TEST_CASE("a checkpoint of a table all in memory resumes with a budget, the rest on disk") {
  TempDir tmp;
  const ZipfDraws zipf(8000, 1.05);
  const EmbeddingTableOptions options = TierOptions(OptimizerType::kAdam);
  auto store = OpenStore(tmp / "store");
  SparseTable reference = MakeReference(options);
  TieredTable unused = MakeTiered(options, 1 << 20, store.get());  // Step feeds both
  std::set<int64_t> seen;
  for (int64_t step = 1; step <= 60; ++step)
    for (int64_t id : Step(zipf, step, reference, unused)) seen.insert(id);
  std::string saved;
  reference.Serialize(&saved);
  auto fresh = OpenStore(tmp / "fresh");
  const int64_t budget = 300;
  auto tiered =
      TieredTable::FromSparseTable(options, budget, fresh.get(), saved.data(), saved.size());
  REQUIRE_MESSAGE(tiered.ok(), tiered.status().ToString());
  CHECK(tiered->tier_counters().resident == budget);
  CHECK(tiered->tier_counters().on_disk == static_cast<int64_t>(reference.rows()) - budget);
  // Rows bit for bit; counters start again from a restore.
  ExpectSame(reference, *tiered, seen, false);
  for (int64_t step = 61; step <= 100; ++step)
    for (int64_t id : Step(zipf, step, reference, *tiered)) seen.insert(id);
  ExpectSame(reference, *tiered, seen, false);
}

TEST_CASE("evict_after_steps drops idle rows from memory and disk alike, as in memory") {
  TempDir tmp;
  const ZipfDraws zipf(10000, 1.05);
  EmbeddingTableOptions options = TierOptions(OptimizerType::kAdagrad);
  options.evict_after_steps = 15;
  auto store = OpenStore(tmp / "store");
  SparseTable reference = MakeReference(options);
  TieredTable tiered = MakeTiered(options, 500, store.get());
  std::set<int64_t> seen;
  int64_t from_disk = 0;
  for (int64_t step = 1; step <= 120; ++step) {
    for (int64_t id : Step(zipf, step, reference, tiered)) seen.insert(id);
    if (step % 10 == 0) {
      const int64_t on_disk = tiered.tier_counters().on_disk;
      const int64_t want = reference.EvictUntouched(step);
      auto got = tiered.EvictUntouched(step);
      REQUIRE_MESSAGE(got.ok(), got.status().ToString());
      CHECK(*got == want);
      from_disk += on_disk - tiered.tier_counters().on_disk;
    }
  }
  ExpectSame(reference, tiered, seen);
  CHECK(reference.counters().evictions > 1000);
  CHECK(from_disk > 1000);  // most idle rows were on disk
}

TEST_CASE("max_rows bounds the rows of both tiers; a dropped row comes back as new") {
  TempDir tmp;
  EmbeddingTableOptions options = TierOptions(OptimizerType::kAdagrad, 4);
  options.max_rows = 4;
  auto store = OpenStore(tmp / "store");
  TieredTable tiered = MakeTiered(options, 2, store.get());
  std::vector<float> out(4), grad(4, 0.5f);
  for (int64_t id = 1; id <= 4; ++id) {
    REQUIRE(tiered.Lookup(&id, 1, out.data(), id).ok());
    REQUIRE(tiered.ApplyGradients(&id, grad.data(), 1, id).ok());
  }
  CHECK(tiered.tier_counters().on_disk >= 1);  // one leaves memory now, one at the next batch
  const int64_t fifth = 5;
  REQUIRE(tiered.Lookup(&fifth, 1, out.data(), 5).ok());
  CHECK(tiered.counters().rows == 4);
  CHECK(tiered.counters().capacity_evictions == 1);
  auto gone = tiered.Find(1);  // the least recently touched, on disk
  REQUIRE(gone.ok());
  CHECK_FALSE(gone->has_value());
  for (int64_t id = 2; id <= 5; ++id) CHECK(tiered.Find(id)->has_value());

  const int64_t first = 1;
  REQUIRE(tiered.Lookup(&first, 1, out.data(), 6).ok());
  std::vector<float> fresh(4);
  InitRow(options, 1, fresh.data());
  CHECK(std::memcmp(out.data(), fresh.data(), sizeof(float) * 4) == 0);
  CHECK((*tiered.Find(1))->updates == 0);
  CHECK(tiered.counters().rows == 4);
  CHECK_FALSE(tiered.Find(2)->has_value());  // now the oldest
}

TEST_CASE("bad ids and budgets are one-line errors that change nothing") {
  TempDir tmp;
  EmbeddingTableOptions options = TierOptions(OptimizerType::kSgd, 4);
  options.vocab = 100;
  auto store = OpenStore(tmp / "store");
  CHECK(TieredTable::Create(options, 0, store.get()).status().message().find("at least 1 row") !=
        std::string::npos);
  // A byte budget: dim 16 with adagrad's slot is 128 bytes of floats, plus
  // 144 of metadata, index (at its worst, while it doubles) and sketch.
  const EmbeddingTableOptions adagrad = TierOptions(OptimizerType::kAdagrad, 16);
  CHECK(TieredTable::RowsForBytes(adagrad, int64_t{1} << 30) == (int64_t{1} << 30) / 272);
  CHECK(TieredTable::RowsForBytes(adagrad, 10) == 1);
  CHECK(ParseTierPolicy("tinylfu").value() == TierPolicy::kTinyLfu);
  CHECK(ParseTierPolicy("lfu").status().message() == "tier policy 'lfu': expected lru or tinylfu");
  TieredTable tiered = MakeTiered(options, 2, store.get());
  CHECK(TieredTable::Create(options, 2, store.get()).status().message().find("opened twice") !=
        std::string::npos);
  const std::vector<int64_t> ids = {1, 2, 3, 100};
  std::vector<float> out(16);
  const Status st = tiered.Lookup(ids.data(), ids.size(), out.data(), 1);
  CHECK(st.message().find("id 100 is outside the vocabulary") != std::string::npos);
  CHECK(tiered.counters().rows == 0);
  CHECK(tiered.counters().lookups == 0);
}

TEST_CASE("a full disk fails the batch with a clear error; no row is lost" *
          doctest::test_suite(kFull)) {
  TempDir tmp;
  TmpfsMount disk(tmp / "disk", "1m");
  REQUIRE_MESSAGE(disk.mounted(), disk.error());
  RowStoreOptions store_options;
  store_options.write_buffer_bytes = 64 << 10;
  auto store = OpenStore(tmp / "disk/store", store_options);
  const ZipfDraws zipf(50000, 1.05);
  const EmbeddingTableOptions options = TierOptions(OptimizerType::kAdagrad, 16);
  SparseTable reference = MakeReference(options);
  TieredTable tiered = MakeTiered(options, 500, store.get());
  const int dim = options.dim;
  std::set<int64_t> seen;
  Status failed;
  int64_t step = 1;
  for (; step <= 2000 && failed.ok(); ++step) {
    // As Step, but the reference follows only the batches the tiered table took.
    const std::vector<int64_t> draws = zipf.Round(kSeed, step, kDrawsPerStep);
    std::vector<float> got(draws.size() * dim), want(draws.size() * dim);
    failed = tiered.Lookup(draws.data(), draws.size(), got.data(), step);
    if (!failed.ok()) break;
    REQUIRE(reference.Lookup(draws.data(), draws.size(), want.data(), step).ok());
    seen.insert(draws.begin(), draws.end());
    const std::vector<float> grads(draws.size() * dim, 0.01f);
    const std::set<int64_t> unique_set(draws.begin(), draws.end());
    const std::vector<int64_t> unique(unique_set.begin(), unique_set.end());
    failed = tiered.ApplyGradients(unique.data(), grads.data(), unique.size(), step);
    if (!failed.ok()) break;
    REQUIRE(reference.ApplyGradients(unique.data(), grads.data(), unique.size(), step).ok());
  }
  REQUIRE_FALSE(failed.ok());
  MESSAGE("failed at step " << step << ": " << failed.message());
  CHECK(failed.message().find("No space left on device") != std::string::npos);
  CHECK(failed.message().find("table 'emb'") != std::string::npos);
  CHECK(failed.message().find('\n') == std::string::npos);
  // Every row is where the table can read it: in memory, or on disk.
  ExpectSame(reference, tiered, seen);
  CHECK(tiered.tier_counters().on_disk > 1000);
}

}  // namespace
}  // namespace pstrain
