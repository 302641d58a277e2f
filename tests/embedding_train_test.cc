// Server-held embedding tables in training (roles/server/table_host.h,
// roles/worker/remote_embeddings.h): on synthetic Criteo-format data, a table on
// the servers trains exactly as the same table as a dense PS tensor does
// (sync mode, adagrad: rows a batch does not touch do not move either way);
// the servers count the rows they created; bad ids are refused.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "comm/ps/row_placement.h"
#include "comm/ps/sparse_client.h"
#include "embedding/row_init.h"
#include "roles/local_job.h"
#include "roles/placement/server_tables.h"
#include "roles/worker/trainer.h"
#include "tests/train_util.h"

namespace pstrain {
namespace {

using Outcome = testing::TrainOutcome;

Outcome Train(const Config& config, int servers, int workers) {
  return testing::TrainLocally(config, servers, workers);
}

using testing::ClickData;

Config ClickConfig(const ClickData& data, bool table_on_servers) {
  Config config = testing::ClickLrConfig(data, 40);
  if (table_on_servers) {
    ParameterRule rule;
    rule.match = "wide.weight";
    rule.init_in_server = true;
    config.parameters.insert(config.parameters.begin(), rule);
  }
  return config;
}

// Runs a scripted WorkerJob (make_job()) on 2 servers and `workers`
// workers, logs captured.
Status RunScripted(const Config& config, int workers,
                   const std::function<std::unique_ptr<WorkerJob>()>& make_job) {
  LocalJobOptions job =
      testing::QuietJob(config, 2, workers, std::make_shared<testing::CaptureSink>());
  job.make_job = [&](int) { return make_job(); };
  return RunLocalJob(job);
}

// Weights() follows the model's params(): wide.weight, dense.weight, dense.bias.
size_t ParamIndex(const std::string& name) {
  const std::vector<std::string> names = {"wide.weight", "dense.weight", "dense.bias"};
  return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

TEST_CASE("a table on the servers trains like the same table as a dense PS tensor") {
  ClickData data;
  Config dense = ClickConfig(data, false), sparse = ClickConfig(data, true);
  Outcome a = Train(dense, 2, 2), b = Train(sparse, 2, 2);
  REQUIRE_MESSAGE(a.status.ok(), a.status.message());
  REQUIRE_MESSAGE(b.status.ok(), b.status.message());
  double worst = 0;
  for (const char* name : {"dense.weight", "dense.bias"}) {
    const size_t t = ParamIndex(name);
    REQUIRE(a.weights[t].size() == b.weights[t].size());
    for (size_t i = 0; i < a.weights[t].size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(a.weights[t][i] - b.weights[t][i])));
  }
  MESSAGE("dense weights after 40 steps differ by at most "
          << worst << "; test AUC " << a.stats.test_metric << " vs " << b.stats.test_metric);
  CHECK(worst <= 1e-6);
  CHECK(std::fabs(a.stats.test_metric - b.stats.test_metric) <= 1e-4);
  CHECK(b.stats.test_metric > 0.6);
}

// train.clip_norm: a table's rows count in the global norm as the same
// table held dense does (its untouched rows' gradients are 0), so both jobs
// take the same norm, clip the same steps and end alike; unclipped, they
// end elsewhere.
TEST_CASE("clip_norm: a table on the servers clips like the same table as a dense PS tensor") {
  ClickData data;
  Config dense = ClickConfig(data, false), sparse = ClickConfig(data, true);
  Outcome plain = Train(dense, 2, 2);
  REQUIRE_MESSAGE(plain.status.ok(), plain.status.message());
  dense.train.clip_norm = sparse.train.clip_norm = 0.05f;
  Outcome a = Train(dense, 2, 2), b = Train(sparse, 2, 2);
  REQUIRE_MESSAGE(a.status.ok(), a.status.message());
  REQUIRE_MESSAGE(b.status.ok(), b.status.message());
  MESSAGE("last norms " << a.stats.grad_norm << " and " << b.stats.grad_norm << "; steps clipped "
                        << a.stats.clipped_steps << " and " << b.stats.clipped_steps);
  CHECK(b.stats.grad_norm == doctest::Approx(a.stats.grad_norm).epsilon(1e-5));
  CHECK(a.stats.clipped_steps > 20);
  CHECK(a.stats.clipped_steps == b.stats.clipped_steps);
  double worst = 0, moved_by_clip = 0;
  for (const char* name : {"dense.weight", "dense.bias"}) {
    const size_t t = ParamIndex(name);
    for (size_t i = 0; i < a.weights[t].size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(a.weights[t][i] - b.weights[t][i])));
      moved_by_clip = std::max(
          moved_by_clip, static_cast<double>(std::fabs(a.weights[t][i] - plain.weights[t][i])));
    }
  }
  MESSAGE("clipped dense weights differ by at most " << worst << "; the clip moved them by up to "
                                                     << moved_by_clip);
  CHECK(worst <= 1e-6);
  CHECK(moved_by_clip > 1e-3);
}

TEST_CASE("tables come back from a checkpoint: a resumed job ends where a straight one does") {
  ClickData data;
  Config config = ClickConfig(data, true);
  Outcome straight = Train(config, 2, 2);
  REQUIRE_MESSAGE(straight.status.ok(), straight.status.message());

  char dir[] = "/tmp/pstrain-tables-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  REQUIRE(config.train.steps == 40);
  auto run = testing::TrainInTwoJobs(config, 2, 2, 20, 10, std::string(dir) + "/ckpt");
  REQUIRE_MESSAGE(run.first.status.ok(), run.first.status.message());
  const Outcome& resumed = run.resumed;
  REQUIRE_MESSAGE(resumed.status.ok(), resumed.status.message());
  CHECK(resumed.stats.steps == 20);
  // Each server had its share of the table (and one of the two dense tensors).
  CHECK(resumed.sink->Matching("resumed 1 partitions and 1 embedding tables").size() == 2);
  for (const char* name : {"dense.weight", "dense.bias"}) {
    const size_t t = ParamIndex(name);
    CHECK(straight.weights[t] == resumed.weights[t]);
  }
  CHECK(straight.stats.test_metric == resumed.stats.test_metric);
  std::filesystem::remove_all(dir);
}

TEST_CASE("sync mode: a row cache changes nothing (every row may change at every step)") {
  ClickData data;
  Config plain = ClickConfig(data, true);
  plain.train.steps = 20;
  Config cached = plain;
  cached.parameters[0].cache_rows = 4000;
  cached.parameters[0].cache_staleness = 5;
  Outcome a = Train(plain, 2, 2), b = Train(cached, 2, 2);
  REQUIRE_MESSAGE(a.status.ok(), a.status.message());
  REQUIRE_MESSAGE(b.status.ok(), b.status.message());
  for (const char* name : {"dense.weight", "dense.bias"})
    CHECK(a.weights[ParamIndex(name)] == b.weights[ParamIndex(name)]);
  CHECK(a.stats.test_metric == b.stats.test_metric);
  // ... and the user is told so, once.
  CHECK(b.sink->Matching("cache_rows of table 'wide.weight' is not used in mode sync").size() == 1);
  CHECK(a.sink->Matching("cache_rows").empty());
}

TEST_CASE("async with a row cache: fewer rows pulled, the next batch's rows prefetched") {
  ClickData data;
  Config uncached = ClickConfig(data, true);
  uncached.train.mode = UpdateMode::kAsync;
  uncached.train.log_every = 10;
  Config cached = uncached;
  cached.parameters[0].cache_rows = 4000;
  cached.parameters[0].cache_staleness = 5;
  Outcome a = Train(uncached, 2, 2), b = Train(cached, 2, 2);
  REQUIRE_MESSAGE(a.status.ok(), a.status.message());
  REQUIRE_MESSAGE(b.status.ok(), b.status.message());
  // "embedding rows: hit rate H, R rows (K KiB) pulled per step, P of them ahead"
  auto rows_pulled = [](const Outcome& o, double* ahead) {
    double rows = 0, prefetched = 0;
    int lines = 0;
    for (const std::string& line : o.sink->Matching("embedding rows: hit rate")) {
      const size_t at = line.find(", ") + 2;
      rows += std::stod(line.substr(at));
      prefetched += std::stod(line.substr(line.find("step, ") + 6));
      ++lines;
    }
    REQUIRE(lines > 0);
    *ahead = prefetched / lines;
    return rows / lines;
  };
  double ahead_a = 0, ahead_b = 0;
  const double rows_a = rows_pulled(a, &ahead_a), rows_b = rows_pulled(b, &ahead_b);
  MESSAGE("rows pulled per step: " << rows_a << " without a cache, " << rows_b << " with one ("
                                   << ahead_b << " of them ahead); AUC " << a.stats.test_metric
                                   << " vs " << b.stats.test_metric);
  CHECK(ahead_a == 0);
  CHECK(ahead_b > 0);
  CHECK(b.sink->Matching("is not used in mode sync").empty());
  CHECK(rows_b < 0.9 * rows_a);
  CHECK(b.stats.test_metric > 0.6);
}

TEST_CASE("a server refuses a negative or out-of-vocabulary id, naming the table and the id") {
  ClickData data;
  // A worker that only sends bad ids to the servers of a real job.
  std::vector<std::string> errors;
  class BadIds : public WorkerJob {
   public:
    explicit BadIds(std::vector<std::string>* errors) : errors_(errors) {}
    std::vector<TensorSpec> PsTensors() override { return {}; }
    Status Run(WorkerContext& ctx) override {
      SparseClient client(ctx.loop, ctx.servers, ctx.rank);
      const std::string table = "wide.weight";
      std::vector<float> rows(1);
      for (int64_t id : {int64_t{-5}, int64_t{65536}}) {
        const std::vector<int64_t> ids = {id};
        Status st = client.Pull({{&table, 1, &ids, rows.data()}}, 0);
        if (st.ok()) return Internal(fmt::format("id {} was accepted", id));
        errors_->push_back(st.message());
        st = client.Push({{&table, 1, &ids, rows.data()}}, 0);
        if (st.ok()) return Internal(fmt::format("a gradient for id {} was accepted", id));
        errors_->push_back(st.message());
      }
      return Status::OK();
    }

   private:
    std::vector<std::string>* errors_;
  };
  Status st =
      RunScripted(ClickConfig(data, true), 1, [&] { return std::make_unique<BadIds>(&errors); });
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(errors.size() == 4);
  CHECK(errors[0].find("embedding table 'wide.weight': id -5 is negative") != std::string::npos);
  CHECK(errors[2].find("id 65536 is outside the vocabulary [0, 65536)") != std::string::npos);
  for (const std::string& e : errors) MESSAGE(e);
}

TEST_CASE("a pull of more rows than one request carries puts every row in its place") {
  // A table of dim 64; 6 requests' worth of ids over two servers take
  // several requests each. Pulled in scattered order, reversed, and sorted
  // by server (each server's rows then land straight in place), every row
  // must be its id's initial row.
  const Config config = OneTableConfig("emb", 64);
  auto tables = ServerTables(config);
  REQUIRE_MESSAGE(tables.ok(), tables.status().message());
  const EmbeddingTableOptions options = tables->at(0).options;

  std::vector<std::string> wrong;
  class BigPulls : public WorkerJob {
   public:
    BigPulls(EmbeddingTableOptions options, std::vector<std::string>* wrong)
        : options_(std::move(options)), wrong_(wrong) {}
    std::vector<TensorSpec> PsTensors() override { return {}; }
    Status Run(WorkerContext& ctx) override {
      SparseClient client(ctx.loop, ctx.servers, ctx.rank);
      std::vector<int64_t> ids;
      const auto n = static_cast<int64_t>(6 * SparseClient::IdsPerPull(64));
      for (int64_t i = 0; i < n; ++i) ids.push_back((i * 7919 + 13) % 100003);
      for (int pass = 0; pass < 3; ++pass) {
        if (pass == 1) std::reverse(ids.begin(), ids.end());
        if (pass == 2)
          std::stable_sort(ids.begin(), ids.end(), [](int64_t a, int64_t b) {
            return ServerOfId(a, 2) < ServerOfId(b, 2);
          });
        // One row more than asked for: a guard that must stay untouched.
        std::vector<float> rows((ids.size() + 1) * 64, -1.0f), expected(64);
        PSTRAIN_RETURN_IF_ERROR(client.Pull({{&options_.name, 64, &ids, rows.data()}}, 0));
        for (size_t k = 0; k < ids.size(); ++k) {
          InitRow(options_, ids[k], expected.data());
          if (!std::equal(expected.begin(), expected.end(), rows.begin() + k * 64))
            wrong_->push_back(fmt::format("pass {}: row {} (id {})", pass, k, ids[k]));
        }
        if (std::any_of(rows.end() - 64, rows.end(), [](float v) { return v != -1.0f; }))
          wrong_->push_back(fmt::format("pass {}: written past the last row", pass));
      }
      return Status::OK();
    }

   private:
    EmbeddingTableOptions options_;
    std::vector<std::string>* wrong_;
  };
  Status st = RunScripted(config, 1, [&] { return std::make_unique<BigPulls>(options, &wrong); });
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK_MESSAGE(wrong.empty(),
                wrong.size() << " rows wrong, first: " << (wrong.empty() ? "" : wrong.front()));
}

TEST_CASE("ssp: no worker runs more than `staleness` steps ahead of the slowest on a table") {
  // As ps_test's case for dense partitions: worker 2 is slow; a worker
  // entering step c + 1 pulls with min_clock c + 1 - staleness, which the
  // table may answer only once the slowest worker has pushed that many steps.
  constexpr int kWorkers = 3, kSteps = 12, kStaleness = 2, kDim = 4;
  Config config = OneTableConfig("emb", kDim);
  config.train.mode = UpdateMode::kSsp;
  config.train.staleness = kStaleness;
  std::atomic<int64_t> clocks[kWorkers] = {};
  std::atomic<int64_t> worst_lead{0};
  class Steps : public WorkerJob {
   public:
    Steps(std::atomic<int64_t>* clocks, std::atomic<int64_t>* worst_lead)
        : clocks_(clocks), worst_lead_(worst_lead) {}
    std::vector<TensorSpec> PsTensors() override { return {}; }
    Status Run(WorkerContext& ctx) override {
      SparseClient client(ctx.loop, ctx.servers, ctx.rank);
      const std::string table = "emb.weight";
      const std::vector<int64_t> ids = {ctx.rank, 100 + ctx.rank};
      std::vector<float> rows(ids.size() * kDim, 0.5f);
      for (int64_t step = 0; step < kSteps; ++step) {
        if (ctx.rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(15));
        clocks_[ctx.rank] = step + 1;  // before the push that the server counts
        PSTRAIN_RETURN_IF_ERROR(client.Push({{&table, kDim, &ids, rows.data()}}, step));
        PSTRAIN_RETURN_IF_ERROR(
            client.Pull({{&table, kDim, &ids, rows.data()}}, step + 1 - kStaleness));
        int64_t slowest = kSteps;
        for (int w = 0; w < kWorkers; ++w) slowest = std::min<int64_t>(slowest, clocks_[w]);
        const int64_t lead = (step + 1) - slowest;
        int64_t prev = *worst_lead_;
        while (lead > prev && !worst_lead_->compare_exchange_weak(prev, lead)) {
        }
      }
      return Status::OK();
    }

   private:
    std::atomic<int64_t>* clocks_;
    std::atomic<int64_t>* worst_lead_;
  };
  Status st =
      RunScripted(config, kWorkers, [&] { return std::make_unique<Steps>(clocks, &worst_lead); });
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(worst_lead <= kStaleness);
  MESSAGE("largest lead over the slowest worker: " << worst_lead.load());
}

// Criteo's columns read as csv, the first 13 categorical ones by the wide
// table and the other 13 by the deep one (data.columns[].table), each
// hashed into its own vocab; `split` false: both read all 26, in
// data.vocab. `on_servers`: both tables held by the servers.
Config SplitColumnsConfig(const ClickData& data, bool split, bool on_servers) {
  std::string columns = "    - {name: label, type: label}\n";
  for (int i = 1; i <= 13; ++i)
    columns += fmt::format("    - {{name: I{}, type: dense, transform: log1p}}\n", i);
  for (int i = 1; i <= 26; ++i)
    columns += fmt::format("    - {{name: C{}, type: categorical{}}}\n", i,
                           !split    ? ""
                           : i <= 13 ? ", table: wide_emb"
                                     : ", table: deep_emb");
  const std::string rules =
      on_servers ? "parameters:\n  - {match: \"*_emb.weight\", init_in_server: true}\n" : "";
  const std::string yaml = fmt::format(R"(model:
  input: [13]
  sparse_fields: 26
  loss: bce_with_logits
  wide:
    - {{name: wide_emb, type: embedding_bag, vocab: {}, dim: 1, init: zeros}}
  deep:
    - {{name: deep_emb, type: embedding_bag, vocab: 4096, dim: 4, mode: concat, init: zeros}}
    - concat
    - {{name: fc1, type: linear, out: 8}}
    - relu
    - {{name: fc2, type: linear, out: 1}}
data:
  format: csv
  delimiter: "\t"
  train: {}/train.txt
  test: {}/test.txt
  vocab: 4096
  columns:
{}train:
  steps: 40
  batch_size: 128
  optimizer: {{type: adagrad, lr: 0.1}}
{})",
                                       split ? 8192 : 4096, data.dir, data.dir, columns, rules);
  auto config = ParseConfig(yaml, "split.yaml");
  REQUIRE_MESSAGE(config.ok(), config.status().message());
  return *config;
}

TEST_CASE("tables that read their own columns train alike on the servers and as PS tensors") {
  ClickData data;
  Outcome servers = Train(SplitColumnsConfig(data, true, true), 2, 2);
  Outcome dense = Train(SplitColumnsConfig(data, true, false), 2, 2);
  Outcome all = Train(SplitColumnsConfig(data, false, true), 2, 2);
  for (const Outcome* o : {&servers, &dense, &all})
    REQUIRE_MESSAGE(o->status.ok(), o->status.message());
  REQUIRE(servers.weights.size() == 6);
  // The dense PS copy of the deep table has 4096 rows x 4, the wide 8192 x 1.
  CHECK(dense.weights[0].size() == 8192);
  CHECK(dense.weights[1].size() == 4096 * 4);
  // fc1 reads 13 slots x dim 4 + 13 dense features.
  CHECK(servers.weights[2].size() == 8 * (13 * 4 + 13));
  CHECK(all.weights[2].size() == 8 * (26 * 4 + 13));
  // Every weight but the two tables' (params() order: wide_emb, deep_emb,
  // fc1, fc2).
  const double worst = testing::LargestDifference(servers, dense, 2);
  MESSAGE("split columns: fc weights on servers and as PS tensors differ by at most "
          << worst << "; test AUC " << servers.stats.test_metric << " and "
          << dense.stats.test_metric
          << "; every table reading every column: " << all.stats.test_metric);
  CHECK(worst <= 1e-6);
  CHECK(std::fabs(servers.stats.test_metric - dense.stats.test_metric) <= 1e-4);
  CHECK(servers.stats.test_metric > 0.6);
}

TEST_CASE("an init_in_server rule on a parameter that is not a table is refused") {
  ClickData data;
  Config config = ClickConfig(data, false);
  ParameterRule rule;
  rule.match = "dense.weight";
  rule.init_in_server = true;
  rule.line = 7;
  config.parameters.insert(config.parameters.begin(), rule);
  auto job = TrainJob::Create(config);
  REQUIRE_FALSE(job.ok());
  CHECK(job.status().message().find(":7: parameters: 'dense.weight'") != std::string::npos);
  CHECK(job.status().message().find("only an embedding_bag's weight") != std::string::npos);
}

}  // namespace
}  // namespace pstrain
