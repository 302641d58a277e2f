// A checkpoint holds everything a job needs to continue: for every
// config in configs/ (threshold-compressed ones included: each worker's
// residuals are kept), in sync mode with 1 and 2 workers on 2 servers, a job
// stopped at step N/2 and resumed ends exactly where a job that ran N steps
// straight does. "Exactly" is checked on the final checkpoint itself: every
// file of step N (server shards with partitions, tables, optimizer state and
// admission counts; all-reduced weights; each worker's place) is byte for
// byte the straight run's, and so are the chief's weights. The configs are
// shrunk to a few steps: a small batch, epochs of 3 to 6 steps (so the stop
// falls mid-epoch and the run crosses an epoch), no evaluation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "embedding/sparse_table.h"
#include "roles/checkpoint/shard_file.h"
#include "roles/placement/server_tables.h"
#include "src/common/checkpoint_file.h"
#include "src/data/libsvm_gen.h"
#include "tests/test_util.h"
#include "tests/train_util.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using testing::RepoPath;

constexpr char kFashionMnist[] = "checkpoint_resume_fashion_mnist";
const bool kSuiteRegistered = testing::SuiteNeeds(kFashionMnist, testing::FashionMnistInstalled);

constexpr int64_t kSteps = 8;  // stopped and resumed at 4
constexpr int kServers = 2;

using testing::TempDir;

// Every config in configs/, by file name.
std::vector<std::string> AllConfigs() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(RepoPath("configs")))
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

Config Load(const std::string& name) {
  auto config = LoadConfig(RepoPath("configs/" + name));
  REQUIRE_MESSAGE(config.ok(), config.status().message());
  if (!config->has_model) {
    // A config of train: and parameters: only (ps_example.yaml) trains the
    // model and data its comment points to.
    auto lenet = LoadConfig(RepoPath("configs/lenet_fashion_mnist.yaml"));
    REQUIRE(lenet.ok());
    config->model = lenet->model;
    config->data = lenet->data;
    config->has_model = config->has_data = true;
  }
  // Resuming is the trainer's and the servers' work, whatever computes the
  // gradients: a GPU config (lenet_gpu.yaml) is checked on the CPU, which
  // every machine has (gpu_test compares the two devices' gradients).
  config->model.device = Device::kCpu;
  // Bit for bit is a promise of sync mode.
  config->train.mode = UpdateMode::kSync;
  config->train.staleness = 0;
  config->train.steps = kSteps;
  config->train.log_every = 1000;
  config->data.test.clear();
  return *config;
}

// Small enough to be quick: epochs of 6 steps with one worker, 3 with two.
// `sparse_dir`: libsvm data of 400 rows in 2 shards, ids below 1001.
void Shrink(Config* config, const testing::ClickData* clicks, const std::string& sparse_dir = "") {
  if (config->data.format == DataFormat::kLibsvm) {
    REQUIRE_FALSE(sparse_dir.empty());
    config->data.train = {sparse_dir + "/train.txt"};
    config->train.batch_size = 32;
    return;
  }
  if (config->data.format == DataFormat::kCriteo) {
    REQUIRE(clicks != nullptr);
    config->data.train = {clicks->dir + "/train.txt"};
    config->data.vocab = 65536;
    for (auto* tower : {&config->model.layers, &config->model.wide, &config->model.deep})
      for (LayerConfig& layer : *tower)
        if (layer.type == LayerType::kEmbeddingBag) layer.vocab = 65536;
    config->train.batch_size = 32;  // 2 shards of about 200 rows
  } else {
    config->train.batch_size = 16;
    config->data.limit = 6 * 16;
  }
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

template <typename T>
void Append(std::string* out, const T* data, size_t n) {
  out->append(reinterpret_cast<const char*>(data), n * sizeof(T));
}

// A server shard's state in a form that does not depend on the order rows
// were made or touched within a step: with two workers their lookups of a
// step reach a server in either order, so two straight runs already differ
// there (and only there). Partitions as stored; each table row by row in id
// order (values, optimizer slots, update count, last touched), its clock,
// update count and pending admissions.
std::string CanonicalShard(const std::string& path, const Config& config, int server, int workers) {
  auto shard = ReadShardFile(path, ShardMeta{server, kServers, workers});
  REQUIRE_MESSAGE(shard.ok(), shard.status().message());
  auto tables = ServerTables(config);
  REQUIRE(tables.ok());
  std::string out;
  for (const PartitionSnapshot& p : shard->partitions) {
    out += p.tensor + "/" + std::to_string(p.part);
    Append(&out, &p.applied, 1);
    Append(&out, &p.clock, 1);
    Append(&out, &p.optimizer_steps, 1);
    Append(&out, p.values.data(), p.values.size());
    for (const auto& [slot, data] : p.slots) Append(&out, data.data(), data.size());
  }
  for (const TableSnapshot& t : shard->tables) {
    auto options = std::find_if(tables->begin(), tables->end(),
                                [&](const ServerTable& s) { return s.options.name == t.name; });
    REQUIRE(options != tables->end());
    auto table = SparseTable::Deserialize(options->options, t.bytes.data(), t.bytes.size());
    REQUIRE_MESSAGE(table.ok(), table.status().message());
    const int dim = table->options().dim, slots = table->optimizer().num_slots();
    out += t.name;
    Append(&out, &t.clock, 1);
    const int64_t counts[] = {table->table_updates(), table->counters().rows,
                              table->counters().pending_ids};
    Append(&out, counts, 3);
    for (int64_t id = 0; id < config.data.vocab; ++id) {
      auto row = table->Find(id);
      if (!row) continue;
      Append(&out, &id, 1);
      Append(&out, row->values, dim);
      Append(&out, row->slots, static_cast<size_t>(dim) * slots);
      Append(&out, &row->updates, 1);
      Append(&out, &row->last_touched, 1);
    }
  }
  return out;
}

// Runs `config` straight and as two jobs; checks both end in the same state.
void CheckResumeIsExact(const std::string& name, Config config, int workers) {
  INFO(name << " with " << workers << " worker(s)");
  TempDir dir;
  const std::string straight_dir = dir.path() + "/straight", split_dir = dir.path() + "/split";
  Config straight_config = config;
  straight_config.train.checkpoint = CheckpointConfig{straight_dir, kSteps / 2, false, 3};
  testing::TrainOutcome straight = testing::TrainLocally(straight_config, kServers, workers);
  REQUIRE_MESSAGE(straight.status.ok(), straight.status.message());
  auto run = testing::TrainInTwoJobs(config, kServers, workers, kSteps / 2, kSteps / 2, split_dir);
  REQUIRE_MESSAGE(run.first.status.ok(), run.first.status.message());
  REQUIRE_MESSAGE(run.resumed.status.ok(), run.resumed.status.message());
  CHECK(run.resumed.sink->Matching("resuming at step 4 from").size() == workers);
  CHECK(run.resumed.stats.steps == kSteps / 2);
  CHECK(run.resumed.weights == straight.weights);

  auto a = FindNewestCheckpoint(straight_dir), b = FindNewestCheckpoint(split_dir);
  REQUIRE_MESSAGE(a.ok(), a.status().message());
  REQUIRE_MESSAGE(b.ok(), b.status().message());
  CHECK(a->step == kSteps);
  CHECK(b->step == kSteps);
  // What a checkpoint must hold, in every layout.
  const auto listed = [&](const std::string& file) {
    return std::count(b->files.begin(), b->files.end(), file) == 1;
  };
  for (int s = 0; s < kServers; ++s) CHECK(listed("server-" + std::to_string(s) + ".ckpt"));
  for (int w = 0; w < workers; ++w) CHECK(listed("worker-" + std::to_string(w) + ".ckpt"));
  // A worker's own state on the PS path (threshold encoders, mode average's
  // local optimizers) is in its own file.
  const bool ps_worker_state =
      config.train.mode == UpdateMode::kAverage || config.train.compression.enabled() ||
      std::any_of(config.parameters.begin(), config.parameters.end(),
                  [](const ParameterRule& rule) {
                    return rule.ps && rule.compression && rule.compression->enabled();
                  });
  for (int w = 0; w < workers; ++w)
    CHECK(listed("ps-worker-" + std::to_string(w) + ".ckpt") == ps_worker_state);
  CHECK(a->files == b->files);
  for (const std::string& file : a->files) {
    INFO(file);
    const std::string path_a = a->step_dir + "/" + file, path_b = b->step_dir + "/" + file;
    int server = -1;
    if (workers > 1 && std::sscanf(file.c_str(), "server-%d.ckpt", &server) == 1) {
      CHECK(CanonicalShard(path_a, config, server, workers) ==
            CanonicalShard(path_b, config, server, workers));
    } else {
      CHECK(FileBytes(path_a) == FileBytes(path_b));
    }
  }
}

void CheckConfigs(bool images) {
  std::unique_ptr<testing::ClickData> clicks;
  TempDir sparse;
  if (!images) {
    LibsvmGenOptions gen;
    gen.rows = 400;
    gen.shards = 2;
    gen.test_rows = 0;
    gen.features = 1000;
    gen.out_dir = sparse.path();
    REQUIRE(GenerateLibsvm(gen).ok());
  }
  int checked = 0;
  for (const std::string& name : AllConfigs()) {
    Config config = Load(name);
    const bool is_images = config.data.format == DataFormat::kIdx;
    if (is_images != images) continue;
    if (!images && !clicks) clicks = std::make_unique<testing::ClickData>(400, 0);
    Shrink(&config, clicks.get(), sparse.path());
    for (int workers : {1, 2}) CheckResumeIsExact(name, config, workers);
    ++checked;
  }
  MESSAGE(checked << (images ? " image" : " click") << " configs resumed exactly");
  CHECK(checked >= 2);
}

TEST_CASE("every click-data config resumes bit for bit, tables included (1 and 2 workers)") {
  CheckConfigs(/*images=*/false);
}

TEST_CASE("every Fashion-MNIST config resumes bit for bit (1 and 2 workers)" *
          doctest::test_suite(kFashionMnist)) {
  CheckConfigs(/*images=*/true);
}

TEST_CASE("mode average resumes bit for bit: each worker's local optimizer state is kept" *
          doctest::test_suite(kFashionMnist)) {
  // Only after a round (every 2 steps; the stop at 4 ends one) do the
  // workers agree; their momentum buffers differ and are each their own.
  for (const char* name : {"lenet_fashion_mnist.yaml", "lenet_hybrid.yaml"}) {
    Config config = Load(name);
    Shrink(&config, nullptr);
    config.train.mode = UpdateMode::kAverage;
    config.train.average_every = 2;
    for (int workers : {1, 2})
      CheckResumeIsExact(std::string(name) + " (average)", config, workers);
  }
}

// train.clip_norm holds no state across steps: a resumed job clips the
// steps after the checkpoint as the straight one does (tables, all-reduced
// and PS weights alike).
TEST_CASE("clipped steps resume bit for bit, tables included (1 and 2 workers)") {
  testing::ClickData clicks(400, 0);
  Config config = Load("wide_deep_criteo.yaml");
  Shrink(&config, &clicks);
  config.train.clip_norm = 0.05f;
  for (int workers : {1, 2})
    CheckResumeIsExact("wide_deep_criteo.yaml (clip_norm)", config, workers);
}

TEST_CASE("clipped steps of the hybrid LeNet resume bit for bit (1 and 2 workers)" *
          doctest::test_suite(kFashionMnist)) {
  Config config = Load("lenet_hybrid.yaml");
  Shrink(&config, nullptr);
  config.train.clip_norm = 0.5f;
  for (int workers : {1, 2}) CheckResumeIsExact("lenet_hybrid.yaml (clip_norm)", config, workers);
}

TEST_CASE("dropout continues its masks after a resume (its only state is a count of draws)") {
  testing::ClickData clicks(400, 0);
  Config config = Load("wide_deep_criteo.yaml");
  Shrink(&config, &clicks);
  LayerConfig dropout;
  dropout.type = LayerType::kDropout;
  dropout.name = "drop1";
  dropout.rate = 0.5f;
  auto& deep = config.model.deep;
  deep.insert(deep.end() - 1, dropout);  // before the last linear layer
  for (int workers : {1, 2}) CheckResumeIsExact("wide_deep_criteo.yaml + dropout", config, workers);
}

TEST_CASE("a resume that would not continue the same run is refused, naming both values") {
  testing::ClickData clicks(400, 0);
  Config config = Load("wide_deep_criteo.yaml");
  Shrink(&config, &clicks);
  TempDir dir;
  auto run = testing::TrainInTwoJobs(config, kServers, 1, kSteps / 2, kSteps / 2, dir.path());
  REQUIRE_MESSAGE(run.first.status.ok(), run.first.status.message());
  REQUIRE_MESSAGE(run.resumed.status.ok(), run.resumed.status.message());

  Config again = config;
  again.train.checkpoint = CheckpointConfig{dir.path(), kSteps / 2, true, 3};
  again.train.steps = 2 * kSteps;
  SUBCASE("another batch size") {
    again.train.batch_size = 16;
    Status st = testing::TrainLocally(again, kServers, 1).status;
    CHECK(st.message().find("batch_size is 32 in the checkpoint, 16 in this run") !=
          std::string::npos);
  }
  SUBCASE("another lr schedule") {
    again.train.optimizer.lr_decay_steps = 100;
    Status st = testing::TrainLocally(again, kServers, 1).status;
    CHECK(st.message().find("lr_schedule is 'none (constant lr) lr 1 constant: wide_emb.weight;") !=
          std::string::npos);
  }
  SUBCASE("another number of servers, with server-held tables") {
    // Another worker count is re-sharded (reshard_resume_test), another
    // server count moves partitions and table rows (server_reshard_test).
    testing::TrainOutcome resumed = testing::TrainLocally(again, 1, 1);
    REQUIRE_MESSAGE(resumed.status.ok(), resumed.status.message());
    CHECK_FALSE(resumed.sink->Matching("resuming a checkpoint of 2 servers with 1").empty());
  }
}

}  // namespace
}  // namespace pstrain
