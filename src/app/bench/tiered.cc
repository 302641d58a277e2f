// bench embedding --cases tiered: lookups + updates per second of a tiered
// table (embedding/tiered_table.h: rows past a memory budget on a RocksDB
// store) at 100%, 30% and 10% of its rows in memory, next to an
// all-in-memory SparseTable on the same draws, for Zipf 1.05 and 1.2.
//   Each round is one worker request: the unique ids of 16384 Zipf draws
//   over --tier-ids ranks, looked up, then updated (adagrad). Rates are over
//   the second half of --tier-rounds rounds (the first half grows the
//   table); the budget is the fraction of the distinct ids drawn. The two
//   tables take turns of 8 rounds, so that both meet the same machine load.
//   read_back_per_batch: rows read from disk per round (second half), the
//   figure that decides the rate.
// The store lives in a fresh directory under --store-dir (default $TMPDIR,
// else /tmp), removed at the end.
#include "src/app/bench/tiered.h"

#include <algorithm>
#include <string>
#include <vector>

#include "embedding/id_dedup.h"
#include "embedding/row_store.h"
#include "embedding/sparse_table.h"
#include "embedding/tiered_table.h"
#include "src/app/bench/clock.h"
#include "src/app/bench/json.h"
#include "src/app/bench/scratch.h"
#include "src/app/bench/zipf.h"

namespace pstrain {
namespace {

constexpr size_t kDrawsPerRound = 16384;

struct Rounds {
  std::vector<std::vector<int64_t>> ids;  // unique ids of each round
  int64_t distinct = 0;                   // over all rounds
};

Rounds Draw(int64_t ranks, double zipf, int rounds) {
  ZipfIds draws(ranks, zipf, 11);
  IdDedup dedup;
  Rounds out;
  std::vector<int64_t> all;
  for (int r = 0; r < rounds; ++r) {
    out.ids.push_back(draws.Round(&dedup, kDrawsPerRound));
    all.insert(all.end(), out.ids.back().begin(), out.ids.back().end());
  }
  dedup.Reset(all.data(), all.size());
  out.distinct = static_cast<int64_t>(dedup.unique().size());
  return out;
}

// Rounds [begin, end) on one table, each a pull then a push of the
// round's ids; adds the time and ops of those in the second half.
struct Timed {
  double seconds = 0;
  int64_t ops = 0;
  double rate() const { return static_cast<double>(ops) / std::max(seconds, 1e-9); }
};
template <typename Table>
Status RunRounds(Table& table, const Rounds& rounds, size_t begin, size_t end, int dim,
                 Timed* timed) {
  std::vector<float> rows, grads;
  for (size_t r = begin; r < end; ++r) {
    const std::vector<int64_t>& ids = rounds.ids[r];
    rows.resize(ids.size() * static_cast<size_t>(dim));
    grads.assign(rows.size(), 0.001f);
    const auto step = static_cast<int64_t>(r);
    const BenchClock::time_point start = BenchClock::now();
    PSTRAIN_RETURN_IF_ERROR(table.Lookup(ids.data(), ids.size(), rows.data(), step));
    PSTRAIN_RETURN_IF_ERROR(table.ApplyGradients(ids.data(), grads.data(), ids.size(), step));
    if (r < rounds.ids.size() / 2) continue;
    timed->seconds += SecondsSince(start);
    timed->ops += 2 * static_cast<int64_t>(ids.size());
  }
  return Status::OK();
}

// Rounds per turn: the tables take turns, so that both meet the same load
// from whatever else runs on the machine; in blocks, not round by round,
// as each would evict the other's rows from the CPU caches.
constexpr size_t kRoundsPerTurn = 8;

const char* PolicyName(TierPolicy policy) { return policy == TierPolicy::kLru ? "lru" : "tinylfu"; }

Status RunZipf(int dim, double zipf, const TieredBenchOptions& options, const std::string& dir) {
  const Rounds rounds = Draw(options.ids, zipf, options.rounds);
  EmbeddingTableOptions table;
  table.name = "emb";
  table.dim = dim;
  table.seed = 42;
  table.init_scale = 0.1f;
  table.optimizer.type = OptimizerType::kAdagrad;
  table.optimizer.lr = 0.05f;
  struct Run {
    double resident;
    TierPolicy policy;
  };
  for (const Run& run : {Run{1.0, TieredTable::kDefaultPolicy}, Run{0.3, TierPolicy::kLru},
                         Run{0.3, TierPolicy::kTinyLfu}, Run{0.1, TierPolicy::kLru},
                         Run{0.1, TierPolicy::kTinyLfu}}) {
    auto memory = SparseTable::Create(table);
    if (!memory.ok()) return memory.status();
    auto store = RowStore::Open(dir + "/store");
    if (!store.ok()) return store.status();
    const auto budget = std::max<int64_t>(
        1, static_cast<int64_t>(run.resident * static_cast<double>(rounds.distinct)));
    auto tiered = TieredTable::Create(table, budget, store->get(), run.policy);
    if (!tiered.ok()) return tiered.status();
    Timed in_memory, on_tiers;
    const size_t n = rounds.ids.size(), half = n / 2;
    TieredTableCounters at_half;
    for (size_t begin = 0, end; begin < n; begin = end) {
      // Turns end at the half, so that the counters can be read there.
      end = std::min(begin < half ? half : n, begin + kRoundsPerTurn);
      PSTRAIN_RETURN_IF_ERROR(RunRounds(*memory, rounds, begin, end, dim, &in_memory));
      PSTRAIN_RETURN_IF_ERROR(RunRounds(*tiered, rounds, begin, end, dim, &on_tiers));
      if (end == half) at_half = tiered->tier_counters();
    }
    const TieredTableCounters end = tiered->tier_counters();
    const auto timed = static_cast<double>(n - half);
    PrintJsonLine({{"bench", "embedding"},
                   {"case", "tiered"},
                   {"dim", dim},
                   {"zipf", Rounded(zipf, 2)},
                   {"distinct_ids", options.ids},
                   {"rounds", options.rounds},
                   {"rows", rounds.distinct},
                   {"resident", Rounded(run.resident, 2)},
                   {"budget_rows", budget},
                   {"policy", PolicyName(run.policy)},
                   {"ops_per_s", Rounded(on_tiers.rate(), 0)},
                   {"memory_ops_per_s", Rounded(in_memory.rate(), 0)},
                   {"vs_memory", Rounded(on_tiers.rate() / in_memory.rate(), 3)},
                   {"read_back_per_batch", Rounded((end.fetched - at_half.fetched) / timed, 1)},
                   {"spilled_per_batch", Rounded((end.spilled - at_half.spilled) / timed, 1)}});
  }
  return Status::OK();
}

}  // namespace

Status RunTieredBench(const std::vector<int>& dims, const TieredBenchOptions& options) {
  auto dir = ScratchDir::Create(options.store_dir);
  if (!dir.ok()) return dir.status();
  for (int dim : dims)
    for (double zipf : {1.05, 1.2})
      PSTRAIN_RETURN_IF_ERROR(RunZipf(dim, zipf, options, dir->path()));
  return Status::OK();
}

}  // namespace pstrain
