// Resuming a checkpoint with another number of servers
// (roles/server/reshard.h): each server of the new job gathers the
// partitions the new map gives it from every shard of the step, optimizer
// state included, and the table rows their ids now hash to, so a sync job
// goes on exactly as it would have with the count that wrote it, rows kept
// on disk included.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/test_util.h"
#include "tests/train_util.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

constexpr int kWorkers = 2;
constexpr int64_t kStopAt = 6, kSteps = 12;

// Logistic regression on click data, its 65,536-row wide tensor a dense PS
// weight cut into 16 partitions, with adagrad (optimizer state per element).
Config Lr(const testing::ClickData& data, const std::string& dir) {
  Config config = testing::ClickLrConfig(data, kStopAt);
  config.data.test.clear();
  config.train.log_every = 1000;
  config.train.partition_bytes = 16384;
  config.train.checkpoint = CheckpointConfig{};
  config.train.checkpoint->dir = dir;
  config.train.checkpoint->every_steps = kStopAt;
  return config;
}

// `config` resumed from a copy of `written` (so that every resume starts from
// the same step) with `servers` servers, run to kSteps.
testing::TrainOutcome Resume(Config config, const std::string& written, int servers,
                             const testing::TempDir& copy) {
  fs::copy(written, copy.path(), fs::copy_options::recursive);
  config.train.checkpoint->dir = copy.path();
  config.train.checkpoint->resume = true;
  config.train.steps = kSteps;
  return testing::TrainLocally(config, servers, kWorkers);
}

// Trains `config` with 2 servers to kStopAt, then resumes that checkpoint
// with 2, 1 and 3 servers to kSteps: every resume ends with the same
// weights (sync updates do not depend on which server holds what), each
// other count logged, and the training went on past the checkpoint.
void CheckResumesWithAnyServerCount(const Config& config, const std::string& written) {
  testing::TrainOutcome first = testing::TrainLocally(config, 2, kWorkers);
  REQUIRE_MESSAGE(first.status.ok(), first.status.message());
  testing::TempDir same_dir, one_dir, three_dir;
  testing::TrainOutcome same = Resume(config, written, 2, same_dir);
  REQUIRE_MESSAGE(same.status.ok(), same.status.message());
  CHECK(same.stats.steps == kSteps - kStopAt);
  CHECK(same.weights != first.weights);
  for (auto [servers, dir] : {std::pair{1, &one_dir}, std::pair{3, &three_dir}}) {
    CAPTURE(servers);
    testing::TrainOutcome other = Resume(config, written, servers, *dir);
    REQUIRE_MESSAGE(other.status.ok(), other.status.message());
    CHECK(other.stats.steps == kSteps - kStopAt);
    CHECK_FALSE(
        other.sink->Matching("resuming a checkpoint of 2 servers with " + std::to_string(servers))
            .empty());
    CHECK(other.weights == same.weights);
  }
}

TEST_CASE("a checkpoint of 2 servers resumes with 1, 2 or 3, and the job goes on the same") {
  testing::ClickData data(4000, 10);
  testing::TempDir written;
  CheckResumesWithAnyServerCount(Lr(data, written.path()), written.path());
}

// Wide&Deep on click data: two server-held tables (rows hashed to servers by
// id) and the MLP on the servers too, with adagrad.
Config WideDeep(const testing::ClickData& data, const std::string& dir) {
  auto loaded = LoadConfig(testing::RepoPath("configs/wide_deep_criteo.yaml"));
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().message());
  Config config = *loaded;
  config.data.train = {data.dir + "/train.txt"};
  config.data.test.clear();
  config.data.vocab = 65536;
  for (auto* tower : {&config.model.layers, &config.model.wide, &config.model.deep})
    for (LayerConfig& layer : *tower)
      if (layer.type == LayerType::kEmbeddingBag) layer.vocab = 65536;
  config.train.batch_size = 32;
  config.train.steps = kStopAt;
  config.train.log_every = 1000;
  config.train.checkpoint = CheckpointConfig{};
  config.train.checkpoint->dir = dir;
  config.train.checkpoint->every_steps = kStopAt;
  return config;
}

TEST_CASE("server-held table rows move to the server their id hashes to with the new count") {
  // The dense weights learn from the rows each batch looks up: equal
  // weights after 6 more steps mean every row came back with its values
  // and its optimizer state.
  testing::ClickData data(2000, 10);
  testing::TempDir written;
  CheckResumesWithAnyServerCount(WideDeep(data, written.path()), written.path());
}

TEST_CASE("table rows kept on disk move too, and go back to disk past the new budget") {
  testing::ClickData data(2000, 10);
  testing::TempDir written, store;
  Config config = WideDeep(data, written.path());
  config.train.store_dir = store.path();
  for (ParameterRule& rule : config.parameters)
    if (rule.init_in_server) rule.server_cache_rows = 64;  // most rows on disk
  CheckResumesWithAnyServerCount(config, written.path());
}

}  // namespace
}  // namespace pstrain
