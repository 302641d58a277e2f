// bench embedding: the sparse tables and the row cache of embedding/ on
// Zipf-distributed ids, as a server and a worker see them.
//   server: a table (adagrad) of one server; each round is one request of a
//     worker: the unique ids of 16384 Zipf draws over 1M ids. Lookups (rows
//     created on first touch) and sparse updates are timed apart: rows/s.
//   cache: a worker's row cache of 1%, 10% and 30% of the distinct ids; each
//     round looks up the unique ids of a batch, misses are fetched (Put).
//     Hit rate over the rounds after a warm-up of as many, next to the
//     best hit rate any cache of that size can expect without seeing the
//     draws in advance (best_hit_rate).
//   pull: a job of 1 server and 1 worker on loopback; the worker pulls the
//     rows of 16384 distinct ids (4 MiB of rows at dim 64), a new set each
//     time, from the server's table of 1M rows, and, for comparison, a
//     dense PS tensor of the same
//     bytes, the two alternating. Median time per pull: rows/s and GB/s of
//     row payload; vs_dense is the median over pairs of sparse goodput over
//     dense goodput.
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <vector>

#include "comm/ps/sparse_client.h"
#include "embedding/id_dedup.h"
#include "embedding/id_map.h"
#include "embedding/row_cache.h"
#include "embedding/sparse_table.h"
#include "roles/local_job.h"
#include "roles/placement/server_tables.h"
#include "src/app/bench/clock.h"
#include "src/app/bench/json.h"
#include "src/app/bench/zipf.h"
#include "src/common/random.h"

namespace pstrain {
namespace {

constexpr int64_t kDistinctIds = 1000000;
constexpr size_t kDrawsPerRound = 16384;

Status RunServerCase(int dim, double zipf) {
  EmbeddingTableOptions options;
  options.name = "bench";
  options.dim = dim;
  options.seed = 7;
  options.optimizer.type = OptimizerType::kAdagrad;
  options.optimizer.lr = 0.05f;
  auto table = SparseTable::Create(options);
  if (!table.ok()) return table.status();
  ZipfIds ids(kDistinctIds, zipf, 11);
  IdDedup dedup;
  std::vector<float> rows, grads;
  double lookup_s = 0, update_s = 0;
  int64_t looked_up = 0, updated = 0;
  const BenchClock::time_point begin = BenchClock::now();
  for (int64_t step = 0; step < 2000 && SecondsSince(begin) < 3.0; ++step) {
    const std::vector<int64_t>& unique = ids.Round(&dedup, kDrawsPerRound);
    rows.resize(unique.size() * static_cast<size_t>(dim));
    grads.assign(rows.size(), 0.001f);
    BenchClock::time_point t = BenchClock::now();
    PSTRAIN_RETURN_IF_ERROR(table->Lookup(unique.data(), unique.size(), rows.data(), step));
    lookup_s += SecondsSince(t);
    t = BenchClock::now();
    PSTRAIN_RETURN_IF_ERROR(
        table->ApplyGradients(unique.data(), grads.data(), unique.size(), step));
    update_s += SecondsSince(t);
    looked_up += static_cast<int64_t>(unique.size());
    updated += static_cast<int64_t>(unique.size());
  }
  PrintJsonLine({{"bench", "embedding"},
                 {"case", "server"},
                 {"dim", dim},
                 {"distinct_ids", kDistinctIds},
                 {"zipf", Rounded(zipf, 2)},
                 {"optimizer", "adagrad"},
                 {"rows", table->counters().rows},
                 {"lookups_per_s", Rounded(looked_up / std::max(lookup_s, 1e-9), 0)},
                 {"updates_per_s", Rounded(updated / std::max(update_s, 1e-9), 0)}});
  return Status::OK();
}

void RunCacheCase(double zipf, double fraction) {
  const int dim = 16;
  RowCache cache(static_cast<size_t>(fraction * kDistinctIds), dim);
  // The bound: a cache that always holds the most probable ids. With
  // independent draws, no cache that cannot see the future hits more often
  // on average (each id's chance to be in the next round is fixed, so the
  // best a cache can hold is the ids with the highest chances). A cache
  // that knew the draws in advance could do better.
  FlatIdMap<bool> most_probable;
  for (int64_t rank = 0; rank < static_cast<int64_t>(cache.capacity()); ++rank)
    most_probable.Insert(ScatteredId(rank), true);
  ZipfIds ids(kDistinctIds, zipf, 13);
  IdDedup dedup;
  const std::vector<float> row(dim, 0.5f);
  const int rounds = 400;  // 6.5M draws; the first half warms the cache
  RowCacheStats at_warm;
  int64_t best_hits = 0;
  for (int step = 0; step < 2 * rounds; ++step) {
    if (step == rounds) at_warm = cache.stats();
    for (int64_t id : ids.Round(&dedup, kDrawsPerRound)) {
      if (cache.Get(id, step, /*max_staleness=*/1 << 30) == nullptr)
        cache.Put(id, row.data(), step);
      if (step >= rounds && most_probable.Find(id) != nullptr) ++best_hits;
    }
  }
  const int64_t hits = cache.stats().hits - at_warm.hits;
  const double gets =
      static_cast<double>(std::max<int64_t>(1, hits + cache.stats().misses - at_warm.misses));
  PrintJsonLine({{"bench", "embedding"},
                 {"case", "cache"},
                 {"zipf", Rounded(zipf, 2)},
                 {"distinct_ids", kDistinctIds},
                 {"cache_fraction", Rounded(fraction, 2)},
                 {"cache_rows", cache.capacity()},
                 {"hit_rate", Rounded(static_cast<double>(hits) / gets, 4)},
                 {"best_hit_rate", Rounded(static_cast<double>(best_hits) / gets, 4)}});
}

double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// The worker of the pull case: creates the table's kTableRows rows, then
// pulls `ids` distinct rows picked anew each time among them, alternating
// with dense pulls of a tensor of as many bytes.
class PullBenchJob : public WorkerJob {
 public:
  static constexpr int64_t kTableRows = int64_t{1} << 20;

  PullBenchJob(int dim, int64_t ids, std::vector<double>* sparse_s, std::vector<double>* dense_s)
      : dim_(dim), ids_(ids), sparse_s_(sparse_s), dense_s_(dense_s) {}
  std::vector<TensorSpec> PsTensors() override { return {{"dense", ids_ * dim_}}; }
  Status Run(WorkerContext& ctx) override {
    const int iters = 200, warmup = 10;
    std::vector<float> rows(static_cast<size_t>(ids_ * dim_), 0.5f);
    SparseClient client(ctx.loop, ctx.servers, ctx.rank);
    const std::string table = "emb.weight";
    std::vector<int64_t> ids(static_cast<size_t>(ids_));
    for (int64_t first = 0; first < kTableRows; first += ids_) {
      for (int64_t i = 0; i < ids_; ++i) ids[i] = ScatteredId(first + i);
      PSTRAIN_RETURN_IF_ERROR(client.Pull({{&table, dim_, &ids, rows.data()}}, 0));
    }
    PSTRAIN_RETURN_IF_ERROR(ctx.kv->Init(0, rows.data()).Wait());
    // Sparse and dense pulls alternate, so that both meet the same load from
    // whatever else runs on the machine.
    Rng rng(5);
    for (int k = 0; k < warmup + iters; ++k) {
      // Rows (a * i + b) mod 2^20 for i < ids: distinct (a is odd), spread
      // over the whole table, a different set each time.
      const uint64_t a = rng.Next() | 1, b = rng.Next();
      for (int64_t i = 0; i < ids_; ++i)
        ids[i] = ScatteredId(static_cast<int64_t>((a * static_cast<uint64_t>(i) + b) % kTableRows));
      BenchClock::time_point t = BenchClock::now();
      PSTRAIN_RETURN_IF_ERROR(client.Pull({{&table, dim_, &ids, rows.data()}}, 0));
      if (k >= warmup) sparse_s_->push_back(SecondsSince(t));
      t = BenchClock::now();
      PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(0, rows.data(), 0).Wait());
      if (k >= warmup) dense_s_->push_back(SecondsSince(t));
    }
    return Status::OK();
  }

 private:
  const int dim_;
  const int64_t ids_;
  std::vector<double>*sparse_s_, *dense_s_;
};

Status RunPullCase(int dim) {
  const int64_t ids = 16384;
  std::vector<double> sparse_s, dense_s;
  LocalJobOptions job;
  job.cluster.server_num = 1;
  job.cluster.worker_num = 1;
  job.config = OneTableConfig("emb", dim);
  job.make_job = [&](int) { return std::make_unique<PullBenchJob>(dim, ids, &sparse_s, &dense_s); };
  job.make_logger = [](const std::string& name) {
    Logger log = MakeLogger(name);
    log->set_level(spdlog::level::warn);
    return log;
  };
  PSTRAIN_RETURN_IF_ERROR(RunLocalJob(job));
  const double bytes = static_cast<double>(ids * dim * sizeof(float));
  const double sparse = Median(sparse_s), dense = Median(dense_s);
  std::vector<double> ratios;
  for (size_t k = 0; k < sparse_s.size(); ++k) ratios.push_back(dense_s[k] / sparse_s[k]);
  PrintJsonLine({{"bench", "embedding"},
                 {"case", "pull"},
                 {"dim", dim},
                 {"table_rows", PullBenchJob::kTableRows},
                 {"ids", ids},
                 {"row_bytes", Rounded(bytes, 0)},
                 {"pull_ms", Rounded(sparse * 1e3, 4)},
                 {"rows_per_s", Rounded(static_cast<double>(ids) / sparse, 0)},
                 {"GBps", Rounded(bytes / sparse / 1e9, 3)},
                 {"dense_pull_ms", Rounded(dense * 1e3, 4)},
                 {"dense_GBps", Rounded(bytes / dense / 1e9, 3)},
                 {"vs_dense", Rounded(Median(ratios), 2)}});
  return Status::OK();
}

}  // namespace

Status RunEmbeddingBench(const std::vector<int>& dims, const std::vector<std::string>& cases) {
  // "data" is bench_cache_bound.cc's.
  auto wanted = [&](const char* name) {
    return std::find(cases.begin(), cases.end(), name) != cases.end();
  };
  if (wanted("server"))
    for (int dim : dims) PSTRAIN_RETURN_IF_ERROR(RunServerCase(dim, 1.05));
  if (wanted("pull"))
    for (int dim : dims) PSTRAIN_RETURN_IF_ERROR(RunPullCase(dim));
  if (wanted("cache"))
    for (double zipf : {1.05, 1.2})
      for (double fraction : {0.01, 0.1, 0.3}) RunCacheCase(zipf, fraction);
  return Status::OK();
}

}  // namespace pstrain
