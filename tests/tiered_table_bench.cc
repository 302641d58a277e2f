// tiered_table_bench: lookups + updates per second of a TieredTable at 100%,
// 30% and 10% of its rows in memory, next to an all-in-memory SparseTable on
// the same draws (Zipf 1.05 and 1.2), and the hit rate of the eviction
// policies a server tier could use. One JSON object per line; measures, never
// asserts.
//   tiered_table_bench [store dir (default $TMPDIR)] [rounds (default 200)]
// Each round is one worker request: the unique ids of 16384 Zipf draws over
// 1M ranks, looked up, then updated (adagrad, dim 16). Rates are over the
// second half of the rounds (the first half grows the table). The budget is
// the fraction of the rows the all-in-memory table holds at the end.
//   policy: on the same stream of batches, the share of a batch's unique ids
//   already in memory with LRU (what TieredTable does) and with LRU plus
//   TinyLFU admission (the worker's RowCache: a row comes in only if its id
//   was asked for more often than the LRU victim's).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "embedding/id_dedup.h"
#include "embedding/row_cache.h"
#include "embedding/row_store.h"
#include "embedding/sparse_table.h"
#include "embedding/tiered_table.h"
#include "tests/tiered_test_util.h"

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kRanks = 1000000;
constexpr size_t kDraws = 16384;
constexpr int kDim = 16;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Runs `rounds` rounds on a table (SparseTable or TieredTable); returns
// lookups + updates per second over the second half.
template <typename Table>
StatusOr<double> Drive(Table& table, const std::vector<std::vector<int64_t>>& batches) {
  std::vector<float> rows, grads;
  double seconds = 0;
  int64_t ops = 0;
  for (size_t round = 0; round < batches.size(); ++round) {
    const std::vector<int64_t>& ids = batches[round];
    rows.resize(ids.size() * kDim);
    grads.assign(rows.size(), 0.001f);
    const Clock::time_point begin = Clock::now();
    const auto step = static_cast<int64_t>(round);
    PSTRAIN_RETURN_IF_ERROR(table.Lookup(ids.data(), ids.size(), rows.data(), step));
    PSTRAIN_RETURN_IF_ERROR(table.ApplyGradients(ids.data(), grads.data(), ids.size(), step));
    if (round >= batches.size() / 2) {
      seconds += Seconds(begin);
      ops += 2 * static_cast<int64_t>(ids.size());
    }
  }
  return ops / std::max(seconds, 1e-9);
}

// Share of the batches' ids already cached, second half, plain LRU.
double LruHitRate(const std::vector<std::vector<int64_t>>& batches, size_t capacity) {
  std::list<int64_t> order;  // front: most recent
  std::unordered_map<int64_t, std::list<int64_t>::iterator> where;
  int64_t hits = 0, asked = 0;
  for (size_t round = 0; round < batches.size(); ++round) {
    for (int64_t id : batches[round]) {
      auto it = where.find(id);
      const bool hit = it != where.end();
      if (round >= batches.size() / 2) {
        hits += hit;
        ++asked;
      }
      if (hit) order.erase(it->second);
      order.push_front(id);
      where[id] = order.begin();
      if (where.size() > capacity) {
        where.erase(order.back());
        order.pop_back();
      }
    }
  }
  return static_cast<double>(hits) / std::max<int64_t>(asked, 1);
}

double TinyLfuHitRate(const std::vector<std::vector<int64_t>>& batches, size_t capacity) {
  RowCache cache(capacity, 1);
  const float row = 0;
  int64_t hits = 0, asked = 0;
  for (size_t round = 0; round < batches.size(); ++round) {
    for (int64_t id : batches[round]) {
      const auto step = static_cast<int64_t>(round);
      const bool hit = cache.Get(id, step, INT64_MAX / 2) != nullptr;
      if (round >= batches.size() / 2) {
        hits += hit;
        ++asked;
      }
      if (!hit) cache.Put(id, &row, step);
    }
  }
  return static_cast<double>(hits) / std::max<int64_t>(asked, 1);
}

Status RunZipf(double s, int rounds, const std::string& dir) {
  const testing::ZipfDraws zipf(kRanks, s);
  std::vector<std::vector<int64_t>> batches(rounds);
  IdDedup dedup;
  for (int round = 0; round < rounds; ++round) {
    const std::vector<int64_t> draws = zipf.Round(11, round, kDraws);
    dedup.Reset(draws.data(), draws.size());
    batches[round] = dedup.unique();
  }
  const EmbeddingTableOptions options = testing::TierOptions(OptimizerType::kAdagrad, kDim);
  auto memory = SparseTable::Create(options);
  if (!memory.ok()) return memory.status();
  auto memory_rate = Drive(*memory, batches);
  if (!memory_rate.ok()) return memory_rate.status();
  const auto rows = static_cast<int64_t>(memory->rows());
  struct Run {
    double fraction;
    TierPolicy policy;
  };
  for (const Run& run :
       {Run{1.0, TierPolicy::kLru}, Run{0.3, TierPolicy::kLru}, Run{0.3, TierPolicy::kTinyLfu},
        Run{0.1, TierPolicy::kLru}, Run{0.1, TierPolicy::kTinyLfu}}) {
    RowStoreOptions store_options;
    if (const char* mib = std::getenv("TIER_BENCH_WRITE_BUFFER_MIB"))
      store_options.write_buffer_bytes = static_cast<size_t>(std::atoi(mib)) << 20;
    auto store = RowStore::Open(dir + "/tiered-bench-store", store_options);
    if (!store.ok()) return store.status();
    const auto budget = static_cast<int64_t>(run.fraction * rows);
    auto tiered = TieredTable::Create(options, budget, store->get(), run.policy);
    if (!tiered.ok()) return tiered.status();
    auto rate = Drive(*tiered, batches);
    if (!rate.ok()) return rate.status();
    const TieredTableCounters c = tiered->tier_counters();
    std::printf(
        "%s\n",
        fmt::format("{{\"bench\":\"embedding\",\"case\":\"tiered\",\"zipf\":{},\"resident\":{},"
                    "\"policy\":\"{}\",\"rows\":{},\"budget_rows\":{},\"dim\":{},"
                    "\"ops_per_s\":{:.0f},\"memory_ops_per_s\":{:.0f},\"vs_memory\":{:.3f},"
                    "\"spilled\":{},\"read_back\":{}}}",
                    s, run.fraction, run.policy == TierPolicy::kLru ? "lru" : "tinylfu", rows,
                    budget, kDim, *rate, *memory_rate, *rate / *memory_rate, c.spilled, c.fetched)
            .c_str());
    std::fflush(stdout);
  }
  for (double fraction : {0.1, 0.3}) {
    const auto capacity = static_cast<size_t>(fraction * rows);
    std::printf("%s\n", fmt::format("{{\"bench\":\"embedding\",\"case\":\"tier_policy\","
                                    "\"zipf\":{},\"resident\":{},\"lru_hit_rate\":{:.4f},"
                                    "\"tinylfu_hit_rate\":{:.4f}}}",
                                    s, fraction, LruHitRate(batches, capacity),
                                    TinyLfuHitRate(batches, capacity))
                            .c_str());
  }
  return Status::OK();
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = argc > 1 ? argv[1] : (tmp && *tmp ? tmp : "/tmp");
  const int rounds = argc > 2 ? std::max(2, std::atoi(argv[2])) : 200;
  for (double s : {1.05, 1.2}) {
    const pstrain::Status st = pstrain::RunZipf(s, rounds, dir);
    if (!st.ok()) {
      std::fprintf(stderr, "tiered_table_bench: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  return 0;
}
