// A server-held table that grows far past its server's memory budget, over
// loopback: a worker pulls and pushes rounds of ids, half of them
// Zipf-drawn among hot rows, half never seen before, so the table grows by
// that many rows a round. The server keeps `budget` bytes of rows in memory
// and the rest on disk. Checked: the job completes; the process's resident
// memory stays under what it was before the table plus the budget plus a
// stated overhead; and a sample of rows read back at the end is, bit for
// bit, what an all-in-memory table fed the same operations on those rows
// holds (the server runs the same code on every row: values depend only on
// the row's own operations).
//
// The default is small enough for CI; the size runs by hand:
//   PSTRAIN_GROW_ROWS=50000000 PSTRAIN_GROW_BUDGET_MB=1024 TMPDIR=/var/tmp
//   build/tests/tiered_grow_test
// (rows: the new ones; the hot ones, at most 2^20, come on top).
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "comm/ps/sparse_client.h"
#include "embedding/sparse_table.h"
#include "roles/local_job.h"
#include "roles/placement/server_tables.h"
#include "tests/test_util.h"
#include "tests/tiered_test_util.h"

namespace pstrain {
namespace {

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::stoll(v);
}

// Resident memory of this process now, in bytes (VmRSS).
int64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

constexpr int kDim = 16;
constexpr int64_t kHotRanks = int64_t{1} << 20;
// Rows of the sample checked at the end: ids whose hash falls here.
bool Sampled(int64_t id) { return Mix64(static_cast<uint64_t>(id) ^ 0x5eed) % 4096 == 0; }

struct GrowResult {
  int64_t rounds = 0, rows = 0;  // rows: the new ones
  int64_t rss_before = 0, rss_peak = 0;
  int64_t sampled = 0, mismatched = 0;
  double seconds = 0;
};

class GrowJob : public WorkerJob {
 public:
  GrowJob(const EmbeddingTableOptions& options, int64_t target_rows, int64_t batch, GrowResult* out)
      : options_(options), target_rows_(target_rows), batch_(batch), out_(out) {}
  std::vector<TensorSpec> PsTensors() override { return {}; }

  Status Run(WorkerContext& ctx) override {
    SparseClient client(ctx.loop, ctx.servers, ctx.rank);
    const std::string table = options_.name;
    // The reference: the same operations on the sampled rows only.
    auto reference = SparseTable::Create(options_);
    if (!reference.ok()) return reference.status();
    testing::ZipfDraws zipf(kHotRanks, 1.05);
    std::vector<int64_t> ids;
    std::vector<float> rows, grads;
    std::vector<int64_t> sample_ids;
    std::vector<float> sample_rows, sample_grads;
    int64_t fresh = 0;  // new rows so far (ranks kHotRanks + fresh)
    const auto start = std::chrono::steady_clock::now();
    out_->rss_peak = ResidentBytes();
    int64_t step = 0;
    for (; fresh < target_rows_; ++step) {
      // Half Zipf among the hot rows, deduplicated; half new rows.
      std::vector<int64_t> drawn = zipf.Round(7, step, static_cast<size_t>(batch_ / 2));
      std::sort(drawn.begin(), drawn.end());
      drawn.erase(std::unique(drawn.begin(), drawn.end()), drawn.end());
      ids = std::move(drawn);
      for (int64_t k = 0; k < batch_ / 2 && fresh < target_rows_; ++k)
        ids.push_back(testing::ZipfDraws::IdOfRank(kHotRanks + fresh++));
      rows.resize(ids.size() * kDim);
      PSTRAIN_RETURN_IF_ERROR(client.Pull({{&table, kDim, &ids, rows.data()}}, step));
      grads.resize(rows.size());
      for (size_t i = 0; i < ids.size(); ++i)
        for (int d = 0; d < kDim; ++d)
          grads[i * kDim + d] = 0.01f * std::sin(0.001f * static_cast<float>(ids[i] % 100000) +
                                                 static_cast<float>(step + d));
      PSTRAIN_RETURN_IF_ERROR(client.Push({{&table, kDim, &ids, grads.data()}}, step));
      // The same two operations on the sample, in the reference.
      sample_ids.clear();
      sample_grads.clear();
      for (size_t i = 0; i < ids.size(); ++i) {
        if (!Sampled(ids[i])) continue;
        sample_ids.push_back(ids[i]);
        sample_grads.insert(sample_grads.end(), grads.begin() + i * kDim,
                            grads.begin() + (i + 1) * kDim);
      }
      sample_rows.resize(sample_ids.size() * kDim);
      PSTRAIN_RETURN_IF_ERROR(
          reference->Lookup(sample_ids.data(), sample_ids.size(), sample_rows.data(), step));
      PSTRAIN_RETURN_IF_ERROR(reference->ApplyGradients(sample_ids.data(), sample_grads.data(),
                                                        sample_ids.size(), step));
      out_->rss_peak = std::max(out_->rss_peak, ResidentBytes());
    }
    out_->rounds = step;
    out_->rows = fresh;
    out_->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Every sampled row, read back through the server.
    std::vector<int64_t> all = reference->Ids();
    std::sort(all.begin(), all.end());
    std::vector<float> back(all.size() * kDim);
    PSTRAIN_RETURN_IF_ERROR(client.Pull({{&table, kDim, &all, back.data()}}, step));
    out_->sampled = static_cast<int64_t>(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      auto want = reference->Find(all[i]);
      if (!want || std::memcmp(want->values, back.data() + i * kDim, kDim * sizeof(float)) != 0)
        ++out_->mismatched;
    }
    return Status::OK();
  }

 private:
  const EmbeddingTableOptions options_;
  const int64_t target_rows_, batch_;
  GrowResult* out_;
};

TEST_CASE("a table grows far past its server's memory budget: rows kept on disk, memory bounded") {
  const int64_t target = EnvInt("PSTRAIN_GROW_ROWS", 1000000);
  const int64_t budget = EnvInt("PSTRAIN_GROW_BUDGET_MB", 16) << 20;
  const int64_t batch = EnvInt("PSTRAIN_GROW_BATCH", 65536);
  testing::TempDir dir;  // under TMPDIR
  REQUIRE_FALSE(dir.path().empty());

  Config config = OneTableConfig("emb", kDim);
  config.parameters[0].optimizer = OptimizerConfig{};
  config.parameters[0].optimizer->type = OptimizerType::kAdagrad;
  config.parameters[0].optimizer->lr = 0.05f;
  config.parameters[0].server_cache_bytes = budget;
  config.train.store_dir = dir.path();
  auto tables = ServerTables(config);
  REQUIRE_MESSAGE(tables.ok(), tables.status().message());
  const EmbeddingTableOptions options = (*tables)[0].options;
  const int64_t row_bytes =
      static_cast<int64_t>(kDim) * 2 * sizeof(float);  // values and adagrad's slot

  GrowResult result;
  result.rss_before = ResidentBytes();
  LocalJobOptions job;
  job.cluster.server_num = 1;
  job.cluster.worker_num = 1;
  job.config = config;
  job.make_job = [&](int) { return std::make_unique<GrowJob>(options, target, batch, &result); };
  auto sink = std::make_shared<testing::CaptureSink>();
  job.make_logger = [sink](const std::string& name) { return testing::CaptureLogger(name, sink); };
  Status st = RunLocalJob(job);
  REQUIRE_MESSAGE(st.ok(), st.message());

  // Whatever the rows on disk: RocksDB's write buffers (2 x 32 MiB) and
  // block cache (64 MiB, its filters and indexes included), the rows of the
  // last two rounds leaving memory, a round's buffers on both sides, the
  // Zipf table (8 MiB), and what malloc keeps.
  const int64_t overhead = int64_t{384} << 20;
  const int64_t growth = result.rss_peak - result.rss_before;
  MESSAGE(fmt::format(
      "{} rows of dim {} ({:.2f} GB of values and adagrad state) in {} rounds of {} ids, {:.1f} "
      "s; memory budget {} MiB; resident memory grew by {} MiB (peak {} MiB, before {} MiB), "
      "allowed {} MiB; {} sampled rows read back, {} differ",
      result.rows, kDim, static_cast<double>(result.rows * row_bytes) / 1e9, result.rounds, batch,
      result.seconds, budget >> 20, growth >> 20, result.rss_peak >> 20, result.rss_before >> 20,
      (budget + overhead) >> 20, result.sampled, result.mismatched));
  CHECK(result.rows == target);
  CHECK(result.rows * row_bytes > 3 * budget);  // the table did not fit
  CHECK(growth < budget + overhead);
  CHECK(result.sampled > 100);
  CHECK(result.mismatched == 0);
}

}  // namespace
}  // namespace pstrain
