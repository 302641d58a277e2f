// Server-held tables with a memory budget in whole jobs (
// roles/server/table_rows.h, roles/checkpoint/store.h): rows beyond the budget
// wait on the server's disk and the job trains exactly as with every row in
// memory; checkpoints carry the store and resume exactly; a store
// directory that is missing or fills up, or a store checkpoint that was
// damaged, stops the job with a line naming it.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "embedding/tiered_table.h"
#include "roles/checkpoint/shard_file.h"
#include "roles/checkpoint/store.h"
#include "roles/placement/server_tables.h"
#include "src/common/checkpoint_file.h"
#include "tests/tiered_test_util.h"
#include "tests/train_util.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using testing::ClickData;
using testing::TrainOutcome;

// Tests that fill a small tmpfs: their own CTest test, skipped where no
// tmpfs can be mounted.
constexpr char kFull[] = "tiered_train_full";
const bool kSuitesRegistered = testing::SuiteNeeds(kFull, testing::CanMountTmpfs);

// Logistic regression on click data, its 65536-row wide table on the
// servers; `budget` rows of it in each server's memory (0: all).
Config TableConfig(const ClickData& data, int64_t budget, const std::string& store_dir) {
  Config config = testing::ClickLrConfig(data, 40);
  ParameterRule rule;
  rule.match = "wide.weight";
  rule.init_in_server = true;
  rule.server_cache_rows = budget;
  config.parameters.insert(config.parameters.begin(), rule);
  config.train.store_dir = store_dir;
  config.train.log_every = 1000;
  return config;
}

// Weights() follows the model's params(): wide.weight (a batch's rows),
// dense.weight, dense.bias.
void CheckSameDense(const TrainOutcome& a, const TrainOutcome& b) {
  REQUIRE(a.weights.size() == 3);
  REQUIRE(b.weights.size() == 3);
  CHECK(a.weights[1] == b.weights[1]);
  CHECK(a.weights[2] == b.weights[2]);
  CHECK(a.stats.test_metric == b.stats.test_metric);
}

// The rows server `rank`'s share of the table holds on disk in the newest
// checkpoint of `dir`.
int64_t RowsOnDisk(const std::string& dir, const Config& config, int rank, int servers,
                   int workers) {
  auto newest = FindNewestCheckpoint(dir);
  REQUIRE_MESSAGE(newest.ok(), newest.status().message());
  auto shard = ReadShardFile(newest->step_dir + "/" + ShardFileName(rank),
                             ShardMeta{rank, servers, workers});
  REQUIRE_MESSAGE(shard.ok(), shard.status().message());
  REQUIRE(shard->has_store);
  REQUIRE(shard->tables.size() == 1);
  CHECK(shard->tables[0].tiered);
  testing::TempDir copy;
  auto store = RowStore::Restore(newest->step_dir + "/" + StoreCheckpointDirName(rank),
                                 copy.path() + "/store");
  REQUIRE_MESSAGE(store.ok(), store.status().message());
  auto tables = ServerTables(config);
  REQUIRE(tables.ok());
  auto table =
      TieredTable::Deserialize((*tables)[0].options, (*tables)[0].memory_rows, store->get(),
                               shard->tables[0].bytes.data(), shard->tables[0].bytes.size());
  REQUIRE_MESSAGE(table.ok(), table.status().message());
  return table->tier_counters().on_disk;
}

TEST_CASE("a table with a memory budget trains bit for bit as one all in memory, and resumes") {
  ClickData data;
  testing::TempDir dir;
  const Config in_memory = TableConfig(data, 0, "");
  const Config tiered = TableConfig(data, 200, dir.path());
  TrainOutcome a = testing::TrainLocally(in_memory, 2, 2);
  REQUIRE_MESSAGE(a.status.ok(), a.status.message());
  auto run = testing::TrainInTwoJobs(tiered, 2, 2, 20, 10, dir.path() + "/ckpt");
  REQUIRE_MESSAGE(run.first.status.ok(), run.first.status.message());
  REQUIRE_MESSAGE(run.resumed.status.ok(), run.resumed.status.message());
  CHECK(run.resumed.stats.steps == 20);
  CHECK(run.first.sink->Matching("table rows beyond their memory budget go to").size() == 2);
  CHECK(run.resumed.sink->Matching("resumed 1 partitions and 1 embedding tables").size() == 2);
  CheckSameDense(a, run.resumed);
  // Most rows were on disk: a budget of 200 of each server's thousands.
  for (int rank : {0, 1}) {
    const int64_t on_disk = RowsOnDisk(dir.path() + "/ckpt", tiered, rank, 2, 2);
    MESSAGE("server " << rank << ": " << on_disk << " rows on disk at the last checkpoint");
    CHECK(on_disk > 1000);
  }
  // Each server's own directory under store_dir.
  CHECK(fs::is_directory(dir.path() + "/server-0"));
  CHECK(fs::is_directory(dir.path() + "/server-1"));
}

// Trains config for 40 steps: 20, a checkpoint, then 20 more in a job
// that resumes it with `budget` rows in memory (0: all).
TrainOutcome ResumeWithBudget(const Config& config, int64_t budget, const std::string& ckpt) {
  Config first = config;
  first.train.steps = 20;
  first.train.checkpoint = CheckpointConfig{ckpt, 20, false, 3};
  TrainOutcome run = testing::TrainLocally(first, 1, 1);
  if (!run.status.ok()) return run;
  Config resumed = config;
  resumed.train.steps = 40;
  resumed.parameters[0].server_cache_rows = budget;
  resumed.train.checkpoint = CheckpointConfig{ckpt, 20, true, 3};
  return testing::TrainLocally(resumed, 1, 1);
}

TEST_CASE("a checkpoint resumes with another memory budget, and trains as all in memory") {
  ClickData data(4000, 400);
  testing::TempDir dir;
  Config in_memory = TableConfig(data, 0, dir.path());
  in_memory.train.steps = 40;
  const TrainOutcome reference = testing::TrainLocally(in_memory, 1, 1);
  REQUIRE_MESSAGE(reference.status.ok(), reference.status.message());
  Config tiered = in_memory;
  tiered.parameters[0].server_cache_rows = 200;
  // Fewer rows in memory than the checkpoint holds there (the rest move to
  // disk with the first batches), more than the table has, and a budget
  // for a table that was all in memory (the rest move to disk at once).
  for (const auto& [from, budget] : std::vector<std::pair<const Config*, int64_t>>{
           {&tiered, 50}, {&tiered, 100000}, {&in_memory, 50}}) {
    CAPTURE(budget);
    CAPTURE(from == &tiered);
    const std::string ckpt = dir / fmt::format("ckpt-{}-{}", from == &tiered, budget);
    TrainOutcome run = ResumeWithBudget(*from, budget, ckpt);
    REQUIRE_MESSAGE(run.status.ok(), run.status.message());
    CHECK(run.sink->Matching("resuming at step 20 from").size() == 1);
    CheckSameDense(reference, run);
    if (budget == 50) CHECK(RowsOnDisk(ckpt, tiered, 0, 1, 1) > 1000);
  }
  // Rows on disk, and no budget to keep them: one line that says what to do.
  TrainOutcome refused = ResumeWithBudget(tiered, 0, dir / "ckpt-refused");
  REQUIRE_FALSE(refused.status.ok());
  CHECK(refused.status.message().find(
            "set server_cache_rows to at least the table's rows on a server") != std::string::npos);
}

TEST_CASE("a store directory that is not there stops the job with one line naming it") {
  ClickData data(2000, 200);
  Config config = TableConfig(data, 100, "/nonexistent/pstrain-store");
  TrainOutcome run = testing::TrainLocally(config, 1, 1);
  REQUIRE_FALSE(run.status.ok());
  CHECK(
      run.sink->Matching("train.store_dir /nonexistent/pstrain-store is not a directory").size() >=
      1);
}

TEST_CASE("a damaged store checkpoint is refused on resume, naming the file") {
  ClickData data(4000, 400);
  testing::TempDir dir;
  Config config = TableConfig(data, 100, dir.path());
  config.train.steps = 10;
  config.train.checkpoint = CheckpointConfig{dir.path() + "/ckpt", 10, false, 3};
  TrainOutcome first = testing::TrainLocally(config, 1, 1);
  REQUIRE_MESSAGE(first.status.ok(), first.status.message());
  auto newest = FindNewestCheckpoint(dir.path() + "/ckpt");
  REQUIRE(newest.ok());
  const std::string store = newest->step_dir + "/" + StoreCheckpointDirName(0);
  std::string sst;
  for (const auto& entry : fs::directory_iterator(store))
    if (entry.path().extension() == ".sst") sst = entry.path().string();
  REQUIRE_FALSE(sst.empty());
  {
    // A copy, so that the store's own hard-linked file stays as it was.
    const std::string bytes = [&] {
      std::ifstream in(sst, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    }();
    fs::remove(sst);
    std::string flipped = bytes;
    flipped[flipped.size() / 2] ^= 0x5a;
    std::ofstream(sst, std::ios::binary) << flipped;
  }
  config.train.steps = 20;
  config.train.checkpoint->resume = true;
  TrainOutcome resumed = testing::TrainLocally(config, 1, 1);
  REQUIRE_FALSE(resumed.status.ok());
  CHECK(resumed.sink->Matching(fs::path(sst).filename().string() + ": checksum mismatch").size() >=
        1);
}

TEST_CASE("a store directory that fills up stops the job with one line naming it" *
          doctest::test_suite(kFull)) {
  ClickData data(4000, 400);
  testing::TempDir dir;
  // Room for the store's own files and its first checkpoints' (checkpoints
  // flush the rows spilled so far to files), not for every row.
  testing::TmpfsMount disk(dir / "disk", "1m");
  REQUIRE_MESSAGE(disk.mounted(), disk.error());
  Config config = TableConfig(data, 100, dir / "disk");
  config.train.steps = 60;
  config.train.checkpoint = CheckpointConfig{dir / "ckpt", 10, false, 3};
  TrainOutcome full = testing::TrainLocally(config, 1, 1);
  REQUIRE_FALSE(full.status.ok());
  MESSAGE(full.status.message());
  CHECK(full.status.message().find("No space left on device") != std::string::npos);
  CHECK(full.status.message().find(dir / "disk/server-0") != std::string::npos);
  CHECK(full.status.message().find('\n') == std::string::npos);
  // Nothing acknowledged is lost: the last checkpoint resumes, on a disk
  // with room, and the job ends as one that never ran out.
  auto newest = FindNewestCheckpoint(dir / "ckpt");
  REQUIRE_MESSAGE(newest.ok(), newest.status().message());
  CHECK(newest->step >= 10);
  fs::create_directory(dir / "roomy");
  config.train.store_dir = dir / "roomy";
  config.train.checkpoint->resume = true;
  TrainOutcome resumed = testing::TrainLocally(config, 1, 1);
  REQUIRE_MESSAGE(resumed.status.ok(), resumed.status.message());
  CHECK(resumed.sink->Matching(fmt::format("resuming at step {} from", newest->step)).size() == 1);
  Config straight = config;
  straight.train.checkpoint.reset();
  TrainOutcome reference = testing::TrainLocally(straight, 1, 1);
  REQUIRE_MESSAGE(reference.status.ok(), reference.status.message());
  CheckSameDense(reference, resumed);
}

}  // namespace
}  // namespace pstrain
