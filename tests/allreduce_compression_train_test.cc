// Compression and averaging on the all-reduce path in whole jobs (configs/lenet_hybrid.yaml on
// Fashion-MNIST, nodes as threads): with threshold compression on the fc*
// weights, and with parameter averaging, a job resumed from a checkpoint
// ends with the uninterrupted run's weights, bit for bit; the workers log
// what compression saved.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "tests/train_util.h"

namespace pstrain {
namespace {

constexpr char kSuite[] = "allreduce_compression_fashion_mnist";
const bool kSuiteRegistered = testing::SuiteNeeds(kSuite, testing::FashionMnistInstalled);

using testing::TrainOutcome;

Config Hybrid() {
  auto config = LoadConfig(testing::RepoPath("configs/lenet_hybrid.yaml"));
  REQUIRE_MESSAGE(config.ok(), config.status().message());
  config->data.test.clear();
  config->data.limit = 32 * 2 * 40;
  config->train.batch_size = 32;
  config->train.steps = 40;
  config->train.log_every = 10;
  return *config;
}

// `config` straight through, and stopped at step 20 then resumed, both with
// a checkpoint every 10 steps: the chief's final weights must agree exactly.
void CheckResumesBitForBit(const Config& config, int servers) {
  char dir[] = "/tmp/pstrain-arc-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  Config checkpointed = config;
  checkpointed.train.checkpoint = CheckpointConfig{};
  checkpointed.train.checkpoint->dir = std::string(dir) + "/straight";
  checkpointed.train.checkpoint->every_steps = 10;
  TrainOutcome straight = testing::TrainLocally(checkpointed, servers, 2);
  REQUIRE_MESSAGE(straight.status.ok(), straight.status.message());
  auto run = testing::TrainInTwoJobs(config, servers, 2, 20, 10, std::string(dir) + "/ckpt");
  REQUIRE_MESSAGE(run.first.status.ok(), run.first.status.message());
  REQUIRE_MESSAGE(run.resumed.status.ok(), run.resumed.status.message());
  CHECK(run.resumed.stats.steps == 20);
  CHECK(testing::LargestDifference(straight, run.resumed) == 0.0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("compressed fc weights: a resumed job ends bit for bit where the straight one does" *
          doctest::test_suite(kSuite)) {
  Config config = Hybrid();
  CompressionConfig compression;
  compression.type = CompressionType::kThreshold;
  compression.shake_up_every = 7;
  for (ParameterRule& rule : config.parameters)
    if (!rule.ps) rule.compression = compression;
  CheckResumesBitForBit(config, 1);
  // What the workers log every log_every steps.
  TrainOutcome logged = testing::TrainLocally(config, 1, 2);
  REQUIRE(logged.status.ok());
  const auto lines = logged.sink->Matching("all-reduced weights: ");
  CHECK(lines.size() == 2 * 4);  // 2 workers, steps 10, 20, 30, 40
  if (!lines.empty()) {
    MESSAGE(lines.back());
    CHECK(lines.back().find("x fewer), density ") != std::string::npos);
  }
}

TEST_CASE("parameter averaging: checkpoints come right after a round, so a resume is exact" *
          doctest::test_suite(kSuite)) {
  // Every weight on the workers; averaging every 5 steps, checkpoints every
  // 10 (a multiple: a checkpoint is taken only where every copy was just
  // averaged, roles/worker/trainer.h AverageDue).
  Config config = Hybrid();
  config.parameters = {ParameterRule{}};
  config.parameters[0].match = "*";
  config.parameters[0].ps = false;
  config.train.mode = UpdateMode::kAverage;
  config.train.average_every = 5;
  CheckResumesBitForBit(config, 0);
}

}  // namespace
}  // namespace pstrain
