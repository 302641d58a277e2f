// bench embedding --cases data --config FILE: how much a row cache could save
// on the config's own training data. Each of W workers reads its shards (as
// in training) in batches of train.batch_size; for caches of 1%, 10% and 30%
// of the distinct ids, the best hit rate on each batch's unique ids is that
// of a cache always holding the ids most frequent in the whole data. With
// samples drawn independently, as in click logs, no cache policy does
// better, so 1 / (1 - best_hit_rate) bounds how many times fewer rows a
// cache of that size can pull. Sizing a cache needs no training run.
#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "embedding/id_dedup.h"
#include "embedding/id_map.h"
#include "src/app/bench/json.h"
#include "src/common/config/config.h"
#include "src/data/dataset.h"

namespace pstrain {

Status RunCacheBoundCase(const std::string& config_path, const std::vector<int>& worker_counts) {
  auto config = LoadConfig(config_path);
  if (!config.ok()) return config.status();
  if (config->data.format != DataFormat::kCriteo)
    return InvalidArgument(config_path + ": the data case needs data.format: criteo");
  const size_t batch_ids = static_cast<size_t>(config->train.batch_size) * 26;
  for (int workers : worker_counts) {
    std::vector<Dataset> shards;
    FlatIdMap<int64_t> counts;
    for (int rank = 0; rank < workers; ++rank) {
      auto data = LoadTrainShard(config->data, rank, workers);
      if (!data.ok()) return data.status();
      for (int64_t id : data->sparse) ++*counts.Insert(id, 0).first;
      shards.push_back(std::move(*data));
    }
    std::vector<std::pair<int64_t, int64_t>> by_count;  // {count, id}
    counts.ForEach([&](int64_t id, int64_t& n) { by_count.emplace_back(n, id); });
    std::sort(by_count.rbegin(), by_count.rend());
    for (double fraction : {0.01, 0.1, 0.3}) {
      const size_t cache_rows =
          static_cast<size_t>(fraction * static_cast<double>(by_count.size()));
      FlatIdMap<bool> cached;
      for (size_t k = 0; k < cache_rows; ++k) cached.Insert(by_count[k].second, true);
      int64_t unique = 0, hits = 0, batches = 0;
      IdDedup dedup;
      for (const Dataset& d : shards) {
        for (size_t at = 0; at + batch_ids <= d.sparse.size(); at += batch_ids, ++batches) {
          dedup.Reset(d.sparse.data() + at, batch_ids);
          unique += static_cast<int64_t>(dedup.unique().size());
          for (int64_t id : dedup.unique()) hits += cached.Find(id) != nullptr;
        }
      }
      const double hit_rate =
          static_cast<double>(hits) / static_cast<double>(std::max<int64_t>(1, unique));
      PrintJsonLine(
          {{"bench", "embedding"},
           {"case", "data"},
           {"config", config_path},
           {"workers", workers},
           {"batch_size", config->train.batch_size},
           {"distinct_ids", by_count.size()},
           {"unique_ids_per_batch", Rounded(static_cast<double>(unique) /
                                                static_cast<double>(std::max<int64_t>(1, batches)),
                                            0)},
           {"cache_fraction", Rounded(fraction, 2)},
           {"cache_rows", cache_rows},
           {"best_hit_rate", Rounded(hit_rate, 4)},
           {"at_most_fewer_rows", Rounded(1.0 / std::max(1e-9, 1.0 - hit_rate), 2)}});
    }
  }
  return Status::OK();
}

}  // namespace pstrain
