#include "roles/worker/data_cache.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "src/data/schema_reader.h"

namespace pstrain {

namespace {

// What decides the samples a load gives: the files and how they are read
// (a text format's schema, as export records it).
std::string KeyOf(const DataConfig& c, const std::vector<std::string>& files) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}", static_cast<int>(c.format), c.limit,
                     static_cast<int>(c.on_bad_row), c.validation_fraction, c.validation_seed,
                     SchemaJson(c), fmt::join(files, "|"));
}

}  // namespace

StatusOr<std::shared_ptr<const Dataset>> DataCache::Train(const DataConfig& config, int rank,
                                                          int workers) {
  MutexLock lock(&mutex_);
  const std::string key = KeyOf(config, config.train);
  // File shards depend on the rank and worker count they were read for.
  const std::string shard_key = fmt::format("{}|{}/{}", key, rank, workers);
  if (train_ && (train_key_ == key || train_key_ == shard_key)) return train_;
  auto data = LoadTrainShard(config, rank, workers);
  if (!data.ok()) return data.status();
  train_key_ = data->sharded_by_file ? shard_key : key;
  train_ = std::make_shared<const Dataset>(std::move(*data));
  return train_;
}

void DataCache::Preload(const DataConfig& config) {
  if (config.format != DataFormat::kIdx)
    for (const std::string& path : config.train)
      if (auto shards = ListShards(path); !shards.ok() || !shards->empty()) return;
  Train(config, 0, 1).status().IgnoreError();  // the run reads it again and says why
}

StatusOr<std::shared_ptr<const Dataset>> DataCache::Test(const DataConfig& config) {
  return Whole(config, config.test, "test");
}

StatusOr<std::shared_ptr<const Dataset>> DataCache::Validation(const DataConfig& config) {
  return Whole(config, ValidationFiles(config), "validation");
}

StatusOr<std::shared_ptr<const Dataset>> DataCache::Whole(const DataConfig& config,
                                                          const std::vector<std::string>& paths,
                                                          const char* which) {
  MutexLock lock(&mutex_);
  Kept* kept = &(std::string_view(which) == "test" ? test_ : validation_);
  const std::string key = KeyOf(config, paths);
  if (kept->data && kept->key == key) return kept->data;
  auto data = std::string_view(which) == "validation" ? LoadValidation(config)
                                                      : LoadWhole(config, paths, which);
  if (!data.ok()) return data.status();
  kept->key = key;
  kept->data = std::make_shared<const Dataset>(std::move(*data));
  return kept->data;
}

}  // namespace pstrain
