// CheckpointWeights (roles/checkpoint/weights.h) on checkpoints written here
// with known values: partitions put back in order from several servers with
// the layout's shapes, all-reduced weights, and the errors a user gets for
// an old checkpoint without a layout, a missing partition, a bad layout.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "roles/checkpoint/shard_file.h"
#include "roles/checkpoint/weights.h"
#include "roles/worker/allreduced_weights.h"
#include "src/common/checkpoint_file.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

using testing::TempDir;

PartitionSnapshot Part(const std::string& tensor, uint32_t part, std::vector<float> values) {
  PartitionSnapshot p;
  p.tensor = tensor;
  p.part = part;
  p.values = std::move(values);
  return p;
}

// Step 10 under dir: "w" [2, 3] in parts 0 (server 1) and 1 (server 0),
// "fc.bias" [2] all-reduced; with the layout unless `layout` is false.
void WriteCheckpoint(const std::string& dir, bool layout, bool both_parts = true) {
  const std::string step_dir = CheckpointStepDir(dir, 10);
  std::vector<std::string> files = {ShardFileName(0), ShardFileName(1), kAllReducedWeightsFileName};
  std::vector<PartitionSnapshot> server0;
  if (both_parts) server0.push_back(Part("w", 1, {4, 5, 6}));
  REQUIRE(WriteShardFile(step_dir + "/" + files[0], {0, 2, 1}, server0).ok());
  REQUIRE(WriteShardFile(step_dir + "/" + files[1], {1, 2, 1}, {Part("w", 0, {1, 2, 3})}).ok());
  const std::string meta = "step 10";
  const float bias[2] = {0.5f, -0.5f};
  REQUIRE(WriteCheckpointFile(step_dir + "/" + files[2], {{"meta", meta.data(), meta.size()},
                                                          {"fc.bias/value", bias, sizeof bias}})
              .ok());
  if (layout) {
    ModelLayout l;
    l.tensors = {{"w", WeightPlace::kServers, {2, 3}}, {"fc.bias", WeightPlace::kAllReduced, {2}}};
    auto name = WriteModelLayout(step_dir, l);
    REQUIRE(name.ok());
    files.push_back(*name);
  }
  REQUIRE(WriteManifest(dir, 10, files).ok());
}

TEST_CASE("dense weights come back whole, in partition order, with their shapes") {
  TempDir dir;
  WriteCheckpoint(dir.path(), true);
  auto w = CheckpointWeights::Open(dir.path());
  REQUIRE(w.ok());
  CHECK((*w)->ref().step == 10);
  REQUIRE((*w)->layout().tensors.size() == 2);
  CHECK((*w)->layout().tensors[0].shape == Shape{2, 3});
  auto values = (*w)->Dense((*w)->layout().tensors[0]);
  REQUIRE(values.ok());
  CHECK(*values == std::vector<float>{1, 2, 3, 4, 5, 6});
  auto bias = (*w)->Dense((*w)->layout().tensors[1]);
  REQUIRE(bias.ok());
  CHECK(*bias == std::vector<float>{0.5f, -0.5f});
}

TEST_CASE("a checkpoint without a layout says it was written before layouts") {
  TempDir dir;
  WriteCheckpoint(dir.path(), false);
  auto w = CheckpointWeights::Open(dir.path());
  REQUIRE(!w.ok());
  CHECK(w.status().message().find("has no model-layout") != std::string::npos);
}

TEST_CASE("a missing partition is named") {
  TempDir dir;
  WriteCheckpoint(dir.path(), true, /*both_parts=*/false);
  auto w = CheckpointWeights::Open(dir.path());
  REQUIRE(w.ok());
  auto values = (*w)->Dense((*w)->layout().tensors[0]);
  REQUIRE(!values.ok());
  CHECK(values.status().message().find("'w' has 12 bytes in 1 partitions, its shape needs 24") !=
        std::string::npos);
}

TEST_CASE("a layout with a bad shape or line is refused, naming the line") {
  TempDir dir;
  for (const std::string text :
       {"layout 1\ntensor w ps 2,0\n", "layout 1\ntensor w ps 2,x\n", "layout 1\ntable t 0\n",
        "layout 2\n", "layout 1\ntensor w ps 1099511627776,2\n"}) {
    const std::string path = dir.path() + "/model-layout";
    REQUIRE(WriteCheckpointFile(path, {{"layout", text.data(), text.size()}}).ok());
    auto layout = ReadModelLayout(path);
    CHECK_MESSAGE(!layout.ok(), text);
  }
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

// Rows are placed by jump hash since shard files say "rows jump"; a file
// without it (an older version's) is read, and flagged, so that a resumed
// server gathers its rows from every shard (roles/server/server.cc).
TEST_CASE("a shard file says how its table rows were placed") {
  TempDir dir;
  const std::string now = dir.path() + "/now.ckpt", before = dir.path() + "/before.ckpt";
  REQUIRE(WriteShardFile(now, {0, 2, 1}, {Part("w", 0, {1, 2, 3})}).ok());
  auto read = ReadShardFile(now, {0, 2, 1});
  REQUIRE(read.ok());
  CHECK_FALSE(read->rows_by_modulo);

  const std::string meta = "server 0\nservers 2\nworkers 1\n";
  REQUIRE(WriteCheckpointFile(before, {{"meta", meta.data(), meta.size()}}).ok());
  read = ReadShardFile(before, {0, 2, 1});
  REQUIRE(read.ok());
  CHECK(read->rows_by_modulo);

  const std::string other = "server 0\nservers 2\nworkers 1\nrows elsewhere\n";
  REQUIRE(WriteCheckpointFile(before, {{"meta", other.data(), other.size()}}).ok());
  CHECK_FALSE(ReadShardFile(before, {0, 2, 1}).ok());
}

}  // namespace
}  // namespace pstrain
