// Tests for embedding/, the server side: row initialization independent of
// placement, sparse optimizers against hand-computed values and against the
// dense optimizer, admission and eviction, bad ids, table serialization
// (round trip and damaged bytes). The worker side: embedding_worker_test.cc.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "embedding/row_batch.h"
#include "embedding/row_init.h"
#include "embedding/sparse_optimizer.h"
#include "embedding/sparse_table.h"
#include "optim/dense_optimizer.h"
#include "tests/optimizer_cases.h"

namespace pstrain {
namespace {

using testing::Config;

EmbeddingTableOptions Options(int dim = 4,
                              OptimizerConfig optimizer = Config(OptimizerType::kSgd, 0.1f)) {
  EmbeddingTableOptions o;
  o.name = "emb";
  o.dim = dim;
  o.seed = 42;
  o.init_scale = 0.5f;
  o.optimizer = optimizer;
  return o;
}

SparseTable MakeTable(const EmbeddingTableOptions& options) {
  auto table = SparseTable::Create(options);
  REQUIRE_MESSAGE(table.ok(), table.status().ToString());
  return std::move(table).value();
}

std::vector<float> Lookup(SparseTable& table, const std::vector<int64_t>& ids, int64_t step) {
  std::vector<float> out(ids.size() * table.options().dim, -7.0f);
  const Status status = table.Lookup(ids.data(), ids.size(), out.data(), step);
  REQUIRE_MESSAGE(status.ok(), status.ToString());
  return out;
}

void Push(SparseTable& table, const std::vector<int64_t>& ids, const std::vector<float>& grads,
          int64_t step) {
  const Status status = table.ApplyGradients(ids.data(), grads.data(), ids.size(), step);
  REQUIRE_MESSAGE(status.ok(), status.ToString());
}

std::vector<float> Values(const SparseTable& table, int64_t id) {
  const auto row = table.Find(id);
  REQUIRE(row.has_value());
  return std::vector<float>(row->values, row->values + table.options().dim);
}

std::vector<float> Slots(const SparseTable& table, int64_t id) {
  const auto row = table.Find(id);
  REQUIRE(row.has_value());
  return std::vector<float>(row->slots,
                            row->slots + table.optimizer().num_slots() * table.options().dim);
}

TEST_CASE("a row's initial values depend on (seed, id) only, not on server or order") {
  for (EmbeddingInit init : {EmbeddingInit::kNormal, EmbeddingInit::kUniform}) {
    INFO(EmbeddingInitName(init));
    EmbeddingTableOptions options = Options(5);
    options.init = init;
    SparseTable server0 = MakeTable(options), server1 = MakeTable(options);
    const std::vector<float> a = Lookup(server0, {3, 1000000007, 12}, 1);
    Lookup(server1, {8, 9, 10}, 1);  // other rows first, later steps
    const std::vector<float> b = Lookup(server1, {12, 3, 1000000007}, 40);
    for (int j = 0; j < 5; ++j) {
      CHECK(a[j] == b[5 + j]);       // id 3
      CHECK(a[5 + j] == b[10 + j]);  // id 1000000007
      CHECK(a[10 + j] == b[j]);      // id 12
    }
    std::vector<float> direct(5);
    InitRow(options, 12, direct.data());
    CHECK(std::equal(direct.begin(), direct.end(), a.begin() + 10));
    options.seed = 43;
    InitRow(options, 12, direct.data());
    CHECK_FALSE(std::equal(direct.begin(), direct.end(), a.begin() + 10));
  }
}

TEST_CASE("initializers have the configured distribution") {
  EmbeddingTableOptions options = Options(64);
  std::vector<float> row(64);
  double sum = 0, sum_sq = 0, min = 1e9, max = -1e9;
  constexpr int kRows = 2000;
  for (int id = 0; id < kRows; ++id) {
    InitRow(options, id, row.data());
    for (float x : row) sum += x, sum_sq += double{x} * x;
  }
  const double n = 64.0 * kRows;
  CHECK(std::fabs(sum / n) < 0.01);
  CHECK(std::sqrt(sum_sq / n) == doctest::Approx(0.5).epsilon(0.02));
  options.init = EmbeddingInit::kUniform;
  sum = 0;
  for (int id = 0; id < kRows; ++id) {
    InitRow(options, id, row.data());
    for (float x : row) sum += x, min = std::min<double>(min, x), max = std::max<double>(max, x);
  }
  CHECK(std::fabs(sum / n) < 0.01);
  CHECK(min >= -0.5);
  CHECK(max < 0.5);
  CHECK(max > 0.49);
  options.init = EmbeddingInit::kZeros;
  InitRow(options, 7, row.data());
  CHECK(std::all_of(row.begin(), row.end(), [](float x) { return x == 0.0f; }));
}

// The same numbers as optim_test's: the sparse row update is that math.
TEST_CASE("each sparse optimizer matches hand-computed values over 3 steps") {
  using testing::kGrads;
  using testing::Vec3;
  for (const testing::LiteralCase& c : testing::LiteralCases()) {
    INFO(c.name);
    SparseOptimizer optimizer(c.config, 3);
    std::vector<float> slots(optimizer.num_slots() * 3);
    optimizer.InitSlots(slots.data());
    Vec3 w = testing::kInitialWeights;
    for (int step = 0; step < 3; ++step) {
      INFO("step " << step + 1);
      optimizer.Update(w.data(), slots.data(), kGrads[step].data(), step + 1,
                       optimizer.ScheduledLr(step));
      for (int i = 0; i < 3; ++i) CHECK(w[i] == doctest::Approx(c.expected[step][i]).epsilon(1e-6));
    }
  }
}

std::vector<OptimizerConfig> AllConfigs() {
  std::vector<OptimizerConfig> configs = {
      Config(OptimizerType::kSgd, 0.1f, 0.01f),   Config(OptimizerType::kMomentum, 0.05f, 0.01f),
      Config(OptimizerType::kAdam, 0.01f, 0.01f), Config(OptimizerType::kAdagrad, 0.1f, 0.01f),
      Config(OptimizerType::kFtrl, 0.1f),         Config(OptimizerType::kFtrl, 0.1f, 0.01f)};
  configs[0].lr_decay_steps = 2;  // the schedule follows pushes to the table
  configs[0].lr_decay = 0.5f;
  configs[1].nesterov = true;
  configs[4].l1 = 0.05f;
  configs[5].lr_power = -0.6f;
  // A warm-up then cosine or step decay, counted in pushes to the table.
  configs.push_back(Config(OptimizerType::kAdamW, 0.01f, 0.05f));
  configs.back().warmup_steps = 2;
  configs.back().cosine_steps = 3;
  configs.back().min_lr = 0.001f;
  configs.push_back(Config(OptimizerType::kRmsprop, 0.01f, 0.01f));
  configs.back().warmup_steps = 1;
  configs.back().lr_decay_steps = 2;
  configs.back().lr_decay = 0.5f;
  return configs;
}

std::vector<float> Grad(int64_t id, int step, int dim) {
  std::vector<float> g(dim);
  for (int j = 0; j < dim; ++j) g[j] = 0.1f * static_cast<float>((id + 3 * step + j) % 7) - 0.3f;
  return g;
}

TEST_CASE("a table updates exactly the pushed rows, as the dense optimizer would") {
  constexpr int kDim = 5;
  for (const OptimizerConfig& config : AllConfigs()) {
    INFO(std::string(OptimizerTypeName(config.type)) << " lr_power " << config.lr_power);
    SparseTable table = MakeTable(Options(kDim, config));
    const int64_t every = 11, late = 22, never = 33;  // pushed at steps 1-3, 3 only, never
    Lookup(table, {every, late, never}, 0);
    const std::vector<float> never_values = Values(table, never);
    const std::vector<float> never_slots = Slots(table, never);
    std::vector<float> dense_every = Values(table, every), dense_late = Values(table, late);
    auto every_optimizer = MakeDenseOptimizer(config, kDim);
    REQUIRE(every_optimizer.ok());
    for (int step = 1; step <= 3; ++step) {
      std::vector<int64_t> ids = {every};
      std::vector<float> grads = Grad(every, step, kDim);
      if (step == 3) {
        ids.push_back(late);
        const std::vector<float> g = Grad(late, step, kDim);
        grads.insert(grads.end(), g.begin(), g.end());
      }
      Push(table, ids, grads, step);
      (*every_optimizer)->Update(dense_every.data(), Grad(every, step, kDim).data());
    }
    // Dense steps 1-3 for `every`; for `late` one update at the table's third
    // push: a dense optimizer that has seen two pushes with no gradient would
    // differ, so the reference is built by hand: lr as scheduled at push 3,
    // Adam's t = 1.
    // Exactly equal: the same float operations in the same order, and the
    // build (top-level CMakeLists.txt) forbids FMA contraction and Eigen's
    // approximate sqrt, so vector and scalar code round alike.
    CHECK(Values(table, every) == dense_every);
    CHECK(table.Find(every)->updates == 3);
    CHECK(table.Find(late)->updates == 1);
    SparseOptimizer reference(config, kDim);
    std::vector<float> late_slots(reference.num_slots() * kDim);
    reference.InitSlots(late_slots.data());
    reference.Update(dense_late.data(), late_slots.data(), Grad(late, 3, kDim).data(), 1,
                     reference.ScheduledLr(2));
    CHECK(Values(table, late) == dense_late);
    CHECK(Values(table, never) == never_values);
    CHECK(Slots(table, never) == never_slots);
    CHECK(table.Find(never)->updates == 0);
  }
}

TEST_CASE("adam is lazy: a row's first update uses t = 1 however late it comes") {
  OptimizerConfig config = Config(OptimizerType::kAdam, 0.01f);
  SparseTable table = MakeTable(Options(2, config));
  Lookup(table, {1, 2}, 0);
  const std::vector<float> before = Values(table, 2);
  for (int step = 1; step <= 10; ++step) Push(table, {1}, {0.5f, -0.5f}, step);
  Push(table, {2}, {0.5f, -0.5f}, 11);
  // t = 1: m/(1-beta1) = g and sqrt(v/(1-beta2)) = |g|, so the row moves by
  // lr * g / (|g| + eps) = lr. With the table's t = 11 it would move 0.43 lr.
  const std::vector<float> after = Values(table, 2);
  CHECK(after[0] == doctest::Approx(before[0] - 0.01f).epsilon(1e-5));
  CHECK(after[1] == doctest::Approx(before[1] + 0.01f).epsilon(1e-5));
  CHECK(table.Find(1)->updates == 10);
  CHECK(table.Find(2)->updates == 1);
}

TEST_CASE("admit_after: an id reads as zeros and drops gradients until its k-th sighting") {
  EmbeddingTableOptions options = Options(3);
  options.admit_after = 3;
  SparseTable table = MakeTable(options);
  std::vector<float> expected(3);
  InitRow(options, 9, expected.data());
  for (int sighting = 1; sighting <= 2; ++sighting) {
    CHECK(Lookup(table, {9}, sighting) == std::vector<float>(3, 0.0f));
    Push(table, {9}, {1.0f, 1.0f, 1.0f}, sighting);
    CHECK_FALSE(table.Find(9).has_value());
  }
  CHECK(table.counters().pending_ids == 1);
  CHECK(Lookup(table, {9}, 3) == expected);  // the dropped gradients left no trace
  const EmbeddingTableCounters c = table.counters();
  CHECK(c.rows == 1);
  CHECK(c.admissions == 1);
  CHECK(c.dropped_gradients == 2);
  CHECK(c.lookups == 3);
  CHECK(c.pending_ids == 0);

  // The sighting counts are bounded: they age rather than grow.
  options.max_pending_ids = 4;
  SparseTable bounded = MakeTable(options);
  for (int64_t id = 100; id < 120; ++id) {
    Lookup(bounded, {id}, 1);
    CHECK(bounded.counters().pending_ids <= 4);
  }
  CHECK(bounded.counters().rows == 0);
}

TEST_CASE("evict_after_steps removes idle rows; a re-created row starts afresh") {
  EmbeddingTableOptions options = Options(2, Config(OptimizerType::kAdagrad, 0.1f));
  options.evict_after_steps = 2;
  SparseTable table = MakeTable(options);
  Lookup(table, {1}, 1);
  Lookup(table, {2, 3}, 2);
  Push(table, {1}, {1.0f, 1.0f}, 3);  // a push touches too
  const std::vector<float> initial_2 = Values(table, 2);
  CHECK(table.EvictUntouched(4) == 0);  // 2 and 3 idle for 2 steps: not more
  CHECK(table.EvictUntouched(5) == 2);
  CHECK(table.Find(1).has_value());
  CHECK_FALSE(table.Find(2).has_value());
  CHECK(table.counters().evictions == 2);
  CHECK(table.counters().rows == 1);
  CHECK(table.EvictUntouched(6) == 1);
  Push(table, {1}, {1.0f, 1.0f}, 7);  // no row any more: dropped
  CHECK(table.counters().dropped_gradients == 1);
  CHECK(Lookup(table, {2}, 8) == initial_2);
  CHECK(table.counters().admissions == 4);

  options.evict_after_steps = 0;  // never
  SparseTable keep = MakeTable(options);
  Lookup(keep, {1}, 1);
  CHECK(keep.EvictUntouched(1000000) == 0);
}

TEST_CASE("max_rows: a new row evicts the least recently touched one instead of failing") {
  EmbeddingTableOptions options = Options(2);
  options.max_rows = 3;
  SparseTable table = MakeTable(options);
  Lookup(table, {1, 2, 3}, 1);
  Lookup(table, {1}, 2);     // 2 and 3 are now the least recent
  Lookup(table, {4, 5}, 3);  // evicts 2, then 3
  CHECK(table.rows() == 3);
  CHECK(table.Find(1).has_value());
  CHECK(table.Find(4).has_value());
  CHECK(table.Find(5).has_value());
  const EmbeddingTableCounters c = table.counters();
  CHECK(c.evictions == 2);
  CHECK(c.capacity_evictions == 2);
  CHECK(c.admissions == 5);
  for (int64_t id = 100; id < 200; ++id) Lookup(table, {id, 1}, 3 + id);
  CHECK(table.rows() == 3);
  CHECK(table.Find(1).has_value());  // touched every step
}

// MergeRows (rows moving in from another server): rows no older than the
// most recent row here go in front without a walk of the list; the order,
// and what max_rows evicts, are those of merging every row at once.
TEST_CASE("rows merged in two parts keep the recency order of one merge") {
  SparseTable source = MakeTable(Options(2));
  Lookup(source, {1, 2, 3}, 1);
  Lookup(source, {4, 5}, 2);
  Lookup(source, {9}, 2);  // a tie with the most recent row of the first part
  Lookup(source, {6, 7, 8}, 3);
  const size_t stride = 2 * (1 + source.optimizer().num_slots());
  RowBatch older(stride), newer(stride), all(stride);
  source.CopyRows({1, 2, 3, 4, 5}, &older);
  source.CopyRows({9, 6, 7, 8}, &newer);
  all.Append(older);
  all.Append(newer);
  EmbeddingTableOptions options = Options(2);
  options.max_rows = 6;
  SparseTable in_two = MakeTable(options), in_one = MakeTable(options);
  in_two.MergeRows(older);
  in_two.MergeRows(newer);
  in_one.MergeRows(all);
  const auto never = [](int64_t) { return false; };
  CHECK(in_two.BackIds(10, never) == std::vector<int64_t>{4, 5, 9, 6, 7, 8});
  CHECK(in_one.BackIds(10, never) == in_two.BackIds(10, never));
  CHECK(in_two.counters().capacity_evictions == 3);
  CHECK(in_one.counters().capacity_evictions == 3);
}

TEST_CASE("a bad id is an error naming the table and the id, and changes nothing") {
  EmbeddingTableOptions options = Options(2);
  options.vocab = 100;
  SparseTable table = MakeTable(options);
  std::vector<float> out(6);
  const std::vector<int64_t> negative = {1, -4, 2}, too_big = {1, 2, 100};
  Status s = table.Lookup(negative.data(), 3, out.data(), 1);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("'emb'") != std::string::npos);
  CHECK(s.message().find("id -4") != std::string::npos);
  s = table.Lookup(too_big.data(), 3, out.data(), 1);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("id 100") != std::string::npos);
  CHECK(s.message().find("'emb'") != std::string::npos);
  s = table.ApplyGradients(negative.data(), out.data(), 3, 1);
  CHECK(s.message().find("id -4") != std::string::npos);
  CHECK(table.counters().lookups == 0);
  CHECK(table.rows() == 0);
  // Hashed tables (vocab 0) accept any id >= 0.
  SparseTable hashed = MakeTable(Options(2));
  Lookup(hashed, {int64_t{1} << 62}, 1);
}

TEST_CASE("options are validated, naming the table and the field") {
  EmbeddingTableOptions o = Options(0);
  Status s = o.Validate();
  CHECK(s.message() == "embedding table 'emb': dim must be > 0, got 0");
  o = Options(4, Config(OptimizerType::kAdam, -1.0f));
  s = o.Validate();
  CHECK(s.message().find("embedding table 'emb'") != std::string::npos);
  CHECK(s.message().find("lr") != std::string::npos);
  o = Options();
  o.max_rows = -1;
  CHECK(o.Validate().message().find("max_rows") != std::string::npos);
  CHECK_FALSE(SparseTable::Create(o).ok());
  CHECK(ParseEmbeddingInit("uniform").value() == EmbeddingInit::kUniform);
  CHECK_FALSE(ParseEmbeddingInit("xavier").ok());
}

// zlib's CRC-32, bit by bit: to forge a checksum over hostile contents.
uint32_t Crc32(const std::string& s) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char ch : s) {
    crc ^= ch;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST_CASE("a restored table admits and evicts as the saved one would: sightings and ties kept") {
  EmbeddingTableOptions options = Options(2);
  options.admit_after = 3;
  options.max_rows = 2;
  SparseTable table = MakeTable(options);
  for (int sighting = 1; sighting <= 2; ++sighting) Lookup(table, {1, 2, 9}, sighting);
  for (int sighting = 3; sighting <= 4; ++sighting) Lookup(table, {9}, sighting);
  // 1 and 2 were seen twice; 9 is a row. Rows touched in one step in the
  // other order than they were made: recency is not arena order.
  Lookup(table, {1, 2}, 5);  // 1 and 2 admitted: 9 evicted (max_rows 2)
  Lookup(table, {2, 1}, 6);  // now 2 is the least recent, same last_touched as 1
  Lookup(table, {7}, 6);     // a sighting to remember
  std::string bytes;
  table.Serialize(&bytes);
  auto restored_or = SparseTable::Deserialize(options, bytes.data(), bytes.size());
  REQUIRE_MESSAGE(restored_or.ok(), restored_or.status().ToString());
  SparseTable restored = std::move(restored_or).value();
  CHECK(restored.counters().pending_ids == table.counters().pending_ids);
  for (SparseTable* t : {&table, &restored}) {
    Lookup(*t, {7}, 7);
    CHECK_FALSE(t->Find(7).has_value());  // its second sighting
    Lookup(*t, {7}, 8);                   // third: admitted, evicting the least recent
    CHECK(t->Find(7).has_value());
    CHECK(t->Find(1).has_value());
    CHECK_FALSE(t->Find(2).has_value());
  }
  std::string again, original;
  restored.Serialize(&again);
  table.Serialize(&original);
  CHECK(again == original);
}

TEST_CASE("Gather: the rows and sightings one server keeps of several shards, state and all") {
  EmbeddingTableOptions options = Options(2, Config(OptimizerType::kAdagrad, 0.1f));
  options.admit_after = 2;
  // Two shards, as two servers held the table: even ids on one, odd on the
  // other; each row looked up twice (admitted), pushed, some more recently.
  SparseTable even = MakeTable(options), odd = MakeTable(options);
  for (int64_t id = 0; id < 12; ++id) {
    SparseTable& shard = id % 2 == 0 ? even : odd;
    Lookup(shard, {id}, 1);
    Lookup(shard, {id}, 2 + id);
    Push(shard, {id}, {0.5f, -0.25f}, 2 + id);
  }
  Lookup(even, {40}, 20);  // one sighting each, pending
  Lookup(odd, {41}, 21);
  std::vector<SparseTable> shards;
  shards.push_back(std::move(even));
  shards.push_back(std::move(odd));
  const auto keep = [](int64_t id) { return id % 3 != 1; };
  auto gathered = SparseTable::Gather(options, shards, keep);
  REQUIRE_MESSAGE(gathered.ok(), gathered.status().ToString());
  SparseTable& table = *gathered;
  for (int64_t id = 0; id < 12; ++id) {
    CAPTURE(id);
    const SparseTable& from = shards[id % 2];
    CHECK(table.Find(id).has_value() == keep(id));
    if (!keep(id)) continue;
    CHECK(Values(table, id) == Values(from, id));
    CHECK(Slots(table, id) == Slots(from, id));
    CHECK(table.Find(id)->updates == from.Find(id)->updates);
    CHECK(table.Find(id)->last_touched == from.Find(id)->last_touched);
  }
  CHECK(table.rows() == 8);
  CHECK(table.counters().pending_ids == 1);  // 41 (41 % 3 == 2); 40 % 3 == 1 is not kept
  CHECK(table.clock() == 21);
  Lookup(table, {41}, 22);  // its second sighting: admitted, as on its old server
  CHECK(table.Find(41).has_value());
  // A row may live on one server only.
  const auto all = [](int64_t) { return true; };
  std::vector<SparseTable> twice;
  twice.push_back(std::move(shards[0]));
  std::string bytes;
  twice[0].Serialize(&bytes);
  auto copy = SparseTable::Deserialize(options, bytes.data(), bytes.size());
  REQUIRE(copy.ok());
  twice.push_back(std::move(copy).value());
  CHECK(SparseTable::Gather(options, twice, all).status().message() ==
        "embedding table 'emb': row 0 in two shards");
}

TEST_CASE("a table survives Serialize and Deserialize, state and steps included") {
  EmbeddingTableOptions options = Options(3, Config(OptimizerType::kAdam, 0.01f));
  SparseTable table = MakeTable(options);
  for (int step = 1; step <= 4; ++step) {
    Lookup(table, {1, 2, 3 + step}, step);
    Push(table, {1, 3 + step}, {0.1f, 0.2f, 0.3f, -0.1f, -0.2f, 0.5f}, step);
  }
  std::string bytes;
  table.Serialize(&bytes);
  auto restored_or = SparseTable::Deserialize(options, bytes.data(), bytes.size());
  REQUIRE_MESSAGE(restored_or.ok(), restored_or.status().ToString());
  SparseTable restored = std::move(restored_or).value();
  CHECK(restored.rows() == table.rows());
  CHECK(restored.table_updates() == table.table_updates());
  for (int64_t id : {1, 2, 4, 5, 6, 7}) {
    INFO("id " << id);
    CHECK(Values(restored, id) == Values(table, id));
    CHECK(Slots(restored, id) == Slots(table, id));
    CHECK(restored.Find(id)->updates == table.Find(id)->updates);
    CHECK(restored.Find(id)->last_touched == table.Find(id)->last_touched);
  }
  // Both continue alike, recency included: at max_rows 5 the same row goes.
  Push(table, {1, 2}, {1, 1, 1, 1, 1, 1}, 5);
  Push(restored, {1, 2}, {1, 1, 1, 1, 1, 1}, 5);
  CHECK(Values(restored, 2) == Values(table, 2));
  options.max_rows = 5;
  auto smaller = SparseTable::Deserialize(options, bytes.data(), bytes.size());
  REQUIRE(smaller.ok());
  CHECK(smaller->rows() == 5);
  CHECK_FALSE(smaller->Find(4).has_value());  // touched last at step 1
  CHECK(smaller->counters().capacity_evictions == 1);

  SUBCASE("every truncation is an error") {
    for (size_t n = 0; n < bytes.size(); ++n) {
      CHECK_FALSE(SparseTable::Deserialize(Options(3, options.optimizer), bytes.data(), n).ok());
    }
  }
  SUBCASE("every flipped byte is an error") {
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::string damaged = bytes;
      damaged[i] ^= 0x20;
      auto r = SparseTable::Deserialize(options, damaged.data(), damaged.size());
      CHECK_FALSE(r.ok());
    }
  }
  SUBCASE("hostile contents with a valid checksum are errors, not crashes") {
    const size_t rows_at = 8 + 4 + 4 + 3 + 12 + 16;  // magic .. table_updates
    for (uint64_t rows : {uint64_t{7}, uint64_t{1} << 40, ~uint64_t{0}}) {
      std::string forged = bytes.substr(0, bytes.size() - 4);
      std::memcpy(&forged[rows_at], &rows, sizeof(rows));
      const uint32_t crc = Crc32(forged);
      forged.append(reinterpret_cast<const char*>(&crc), 4);
      auto r = SparseTable::Deserialize(options, forged.data(), forged.size());
      CHECK_FALSE(r.ok());
    }
    std::string duplicate = bytes.substr(0, bytes.size() - 4);
    const size_t row_bytes = 24 + 3 * 3 * 4;
    std::memcpy(&duplicate[rows_at + 8 + row_bytes], &duplicate[rows_at + 8], 8);  // id twice
    const uint32_t crc = Crc32(duplicate);
    duplicate.append(reinterpret_cast<const char*>(&crc), 4);
    auto r = SparseTable::Deserialize(options, duplicate.data(), duplicate.size());
    CHECK(r.status().message().find("twice") != std::string::npos);
  }
  SUBCASE("another table's bytes are refused") {
    EmbeddingTableOptions other = options;
    other.name = "other";
    CHECK(SparseTable::Deserialize(other, bytes.data(), bytes.size())
              .status()
              .message()
              .find("holds table 'emb'") != std::string::npos);
    other = options;
    other.dim = 4;
    CHECK_FALSE(SparseTable::Deserialize(other, bytes.data(), bytes.size()).ok());
    other = options;
    other.optimizer.type = OptimizerType::kFtrl;
    CHECK_FALSE(SparseTable::Deserialize(other, bytes.data(), bytes.size()).ok());
  }
}

}  // namespace
}  // namespace pstrain
