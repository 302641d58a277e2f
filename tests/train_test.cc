// Training end to end on Fashion-MNIST through the parameter servers: sync
// mode with 2 workers x batch 32 is the same computation as 1 worker x batch
// 64; a short run learns; misplaced parameters are refused.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "roles/local_job.h"
#include "roles/worker/trainer.h"
#include "src/gpu/gpu.h"
#include "src/nn/model.h"
#include "tests/train_util.h"

namespace pstrain {
namespace {

// The cases that train on the real data set: CTest skips them where it is
// missing.
constexpr char kFashionMnist[] = "train_fashion_mnist";
const bool kSuiteRegistered = testing::SuiteNeeds(kFashionMnist, testing::FashionMnistInstalled);

using Outcome = testing::TrainOutcome;
using testing::LargestDifference;
using testing::RepoPath;

Outcome Train(const Config& config, int servers, int workers) {
  return testing::TrainLocally(config, servers, workers);
}

Config Lenet(const std::string& file = "configs/lenet_fashion_mnist.yaml") {
  auto config = LoadConfig(RepoPath(file));
  REQUIRE_MESSAGE(config.ok(), config.status().message());
  return *config;
}

// Runs `file` (its LeNet made smooth, see below) for 50 steps as 1 worker of
// batch 64 and as 2 workers of batch 32: in exact arithmetic both end with
// the same weights. In float they round differently: the step's gradient is
// one sum over 64 samples in one run and the average of two sums over 32 in
// the other, and the GEMMs behind the per-sample terms have other shapes. The
// tolerance comes from float's rounding alone, so no CPU (vector width, GEMM
// blocking) can break it:
//  1. After each step both runs round w - lr * v to a float; two roundings of
//     nearly equal values can land one ulp apart: T ulp(max |w|) in T steps.
//  2. The updates lr * v differ by the rounding of the sums behind them. The
//     longest is a convolution weight's gradient: 64 samples x 28 x 28
//     output positions = n terms. The rounding errors of a sum of n terms
//     add up like a random walk, rarely beyond a few sqrt(n) u of its size
//     (u = 2^-24; Higham and Mary, "A new approach to probabilistic rounding
//     error analysis", 2019); 3 sqrt(n) u for each run, doubled for both.
//     Over the steps the updates add up to how far a weight moved (momentum
//     spreads a gradient over later steps but keeps its sum).
// So |w_a - w_b| <= T ulp(max |w|) + 6 sqrt(n) u max |w_T - w_0|: 4e-5
// here, while the runs measure 2e-7 (3 ulps) apart, and one step fewer in one
// run puts them 8e-3 apart. This holds only while a rounding difference
// moves the trajectory smoothly: with ReLU and max pools it can flip a unit or
// a pool's winner, and the runs then part for good at a step that depends on
// the CPU. Hence tanh and average pools, at the config's own lr.
// `file`'s LeNet made smooth (tanh, average pools) for `steps` steps of 64
// samples in all, no test set.
Config SmoothLenet(const std::string& file, int steps) {
  Config config = Lenet(file);
  config.train.steps = steps;
  config.data.test.clear();
  config.data.limit = 64 * steps;
  for (LayerConfig& layer : config.model.layers) {
    if (layer.type == LayerType::kRelu) layer.type = LayerType::kTanh;
    if (layer.type == LayerType::kMaxpool) layer.type = LayerType::kAvgpool;
  }
  return config;
}

void CheckSyncEquivalence(const std::string& file, int servers, float clip_norm = 0) {
  constexpr int kSteps = 50;
  Config config = SmoothLenet(file, kSteps);
  config.train.clip_norm = clip_norm;
  Config one = config, two = config;
  one.train.batch_size = 64;
  two.train.batch_size = 32;
  Outcome a = Train(one, servers, 1), b = Train(two, servers, 2);
  REQUIRE_MESSAGE(a.status.ok(), a.status.message());
  REQUIRE_MESSAGE(b.status.ok(), b.status.message());
  CHECK(a.stats.steps == kSteps);
  CHECK(b.stats.steps == kSteps);
  if (clip_norm > 0) {
    MESSAGE("steps clipped: " << a.stats.clipped_steps << " and " << b.stats.clipped_steps);
    CHECK(a.stats.clipped_steps > kSteps / 2);
    CHECK(a.stats.clipped_steps == b.stats.clipped_steps);
  }

  auto initial = Model::Build(config.model, config.train.seed);  // what both runs start from
  REQUIRE(initial.ok());
  const std::vector<Param*>& params = (*initial)->params();
  REQUIRE(params.size() == a.weights.size());
  float largest = 0;
  double moved = 0;
  for (size_t t = 0; t < params.size(); ++t) {
    REQUIRE(static_cast<size_t>(params[t]->value.size()) == a.weights[t].size());
    for (size_t i = 0; i < a.weights[t].size(); ++i) {
      largest = std::max(largest, std::fabs(a.weights[t][i]));
      moved = std::max(moved,
                       std::fabs(static_cast<double>(a.weights[t][i]) - params[t]->value.data[i]));
    }
  }
  const double u = std::numeric_limits<float>::epsilon() / 2;
  const double ulp = std::nextafter(largest, std::numeric_limits<float>::infinity()) - largest;
  const double n = 64.0 * 28 * 28;
  const double tolerance = kSteps * ulp + 6 * std::sqrt(n) * u * moved;
  const double worst = LargestDifference(a, b);
  MESSAGE(file << ": after " << kSteps << " steps the weights moved up to " << moved
               << " and differ by up to " << worst << " (tolerance " << tolerance << ")");
  CHECK(moved > 100 * tolerance);  // a lost or doubled step would show
  CHECK(worst <= tolerance);
}

TEST_CASE("sync: 2 workers x batch 32 equal 1 worker x batch 64 after 50 steps" *
          doctest::test_suite(kFashionMnist)) {
  CheckSyncEquivalence("configs/lenet_fashion_mnist.yaml", 2);
}

TEST_CASE("hybrid: convolutions on the servers, fc all-reduced: 2 x 32 equal 1 x 64" *
          doctest::test_suite(kFashionMnist)) {
  CheckSyncEquivalence("configs/lenet_hybrid.yaml", 2);
}

// train.clip_norm: the norm of a step's mean gradient over every weight,
// the convolutions' on 2 servers and the fc layers' all-reduced, is the
// single process's. One plain SGD step of 1 worker x 64, unclipped, gives
// that gradient: g = (w0 - w1) / lr. 2 workers x 32 on 2 servers, clipped
// to a quarter of its norm, must report the norm and end at
// w0 - (w0 - w1) / 4, within float's rounding (as CheckSyncEquivalence
// bounds it, for one step).
TEST_CASE("clip_norm: 2 servers and the all-reduce clip by the single-process global norm" *
          doctest::test_suite(kFashionMnist)) {
  Config config = SmoothLenet("configs/lenet_hybrid.yaml", 1);
  config.train.optimizer = OptimizerConfig{};
  config.train.optimizer.type = OptimizerType::kSgd;
  config.train.optimizer.lr = 1.0f;  // g read back from w0 - w1 to float's precision
  Config one = config, two = config;
  one.train.batch_size = 64;
  Outcome plain = Train(one, 1, 1);
  REQUIRE_MESSAGE(plain.status.ok(), plain.status.message());
  CHECK(plain.stats.grad_norm == -1);  // not clipping: no norm taken

  auto initial = Model::Build(config.model, config.train.seed);
  REQUIRE(initial.ok());
  const std::vector<Param*>& params = (*initial)->params();
  REQUIRE(params.size() == plain.weights.size());
  double squares = 0;
  for (size_t t = 0; t < params.size(); ++t)
    for (size_t i = 0; i < plain.weights[t].size(); ++i) {
      const double g = static_cast<double>(params[t]->value.data[i]) - plain.weights[t][i];
      squares += g * g;
    }
  const double norm = std::sqrt(squares);
  constexpr double kFactor = 0.25;
  two.train.batch_size = 32;
  two.train.clip_norm = static_cast<float>(kFactor * norm);
  Outcome clipped = Train(two, 2, 2);
  REQUIRE_MESSAGE(clipped.status.ok(), clipped.status.message());
  MESSAGE("single-process norm " << norm << ", the clipped job's " << clipped.stats.grad_norm);
  CHECK(clipped.stats.grad_norm == doctest::Approx(norm).epsilon(1e-4));
  CHECK(clipped.stats.clipped_steps == 1);

  float largest = 0;
  double moved = 0, worst = 0;
  for (size_t t = 0; t < params.size(); ++t)
    for (size_t i = 0; i < plain.weights[t].size(); ++i) {
      const double w0 = params[t]->value.data[i];
      const double step = w0 - plain.weights[t][i];
      largest = std::max(largest, std::fabs(plain.weights[t][i]));
      moved = std::max(moved, std::fabs(step));
      worst = std::max(worst, std::fabs(clipped.weights[t][i] - (w0 - kFactor * step)));
    }
  const double u = std::numeric_limits<float>::epsilon() / 2;
  const double ulp = std::nextafter(largest, std::numeric_limits<float>::infinity()) - largest;
  const double tolerance = 2 * ulp + 6 * std::sqrt(64.0 * 28 * 28) * u * moved;
  MESSAGE("the clipped weights differ from w0 - (w0 - w1) / 4 by up to " << worst << " (tolerance "
                                                                         << tolerance << ")");
  CHECK(kFactor * moved > 100 * tolerance);
  CHECK(worst <= tolerance);
}

TEST_CASE("clip_norm: 2 workers x batch 32 equal 1 worker x batch 64 over 50 clipped steps" *
          doctest::test_suite(kFashionMnist)) {
  CheckSyncEquivalence("configs/lenet_hybrid.yaml", 2, /*clip_norm=*/0.5f);
}

TEST_CASE("hybrid: the ring over shared memory and over TCP give the same weights" *
          doctest::test_suite(kFashionMnist)) {
  Config config = Lenet("configs/lenet_hybrid.yaml");
  config.train.steps = 20;
  config.data.test.clear();
  config.data.limit = 2 * 64 * 20;
  // Two workers: a server adds the workers' gradients in the order they
  // arrive, which changes the last bits of a sum of three or more.
  Outcome shm = testing::TrainLocally(config, 1, 2, "auto");
  Outcome tcp = testing::TrainLocally(config, 1, 2, "tcp");
  REQUIRE_MESSAGE(shm.status.ok(), shm.status.message());
  REQUIRE_MESSAGE(tcp.status.ok(), tcp.status.message());
  CHECK(shm.sink->Matching("ring: the 2 workers share this host: shared memory").size() == 2);
  CHECK(tcp.sink->Matching("ring: TCP among the workers").size() == 2);
  CHECK(LargestDifference(shm, tcp) == 0.0);
}

TEST_CASE("hybrid: a job resumed from a checkpoint ends with the uninterrupted run's weights" *
          doctest::test_suite(kFashionMnist)) {
  Config config = Lenet("configs/lenet_hybrid.yaml");
  config.data.test.clear();
  config.data.limit = 32 * 2 * 40;
  config.train.batch_size = 32;
  config.train.steps = 40;
  // Adam: its optimizer state (two slots and a step count) must come back too.
  config.train.optimizer = OptimizerConfig{};
  config.train.optimizer.type = OptimizerType::kAdam;
  config.train.optimizer.lr = 0.004f;
  Outcome straight = Train(config, 1, 2);
  REQUIRE_MESSAGE(straight.status.ok(), straight.status.message());

  char dir[] = "/tmp/pstrain-hybrid-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string checkpoints = std::string(dir) + "/ckpt";
  auto run = testing::TrainInTwoJobs(config, 1, 2, 20, 10, checkpoints);
  REQUIRE_MESSAGE(run.first.status.ok(), run.first.status.message());
  CHECK(std::filesystem::exists(checkpoints + "/step-000000000020/allreduced-weights"));
  const Outcome& resumed = run.resumed;
  REQUIRE_MESSAGE(resumed.status.ok(), resumed.status.message());
  CHECK(resumed.stats.steps == 20);
  CHECK(LargestDifference(straight, resumed) == 0.0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a short run learns: MLP test accuracy well above chance after 300 steps" *
          doctest::test_suite(kFashionMnist)) {
  auto config = LoadConfig(RepoPath("configs/mlp_fashion_mnist.yaml"));
  REQUIRE(config.ok());
  config->train.steps = 300;
  Outcome out = Train(*config, 1, 2);
  REQUIRE_MESSAGE(out.status.ok(), out.status.message());
  MESSAGE("test accuracy after 300 steps of 2 x 64: " << out.stats.test_metric);
  CHECK(out.stats.test_metric > 0.75);
}

TEST_CASE("device: gpu fails at start-up when no GPU is visible, saying so") {
  Config config = Lenet("configs/lenet_hybrid.yaml");
  config.model.device = Device::kGpu;
  auto job = TrainJob::Create(config);
  if (CheckGpuVisible().ok()) {
    MESSAGE("a GPU is visible here, so the job starts");
    CHECK_MESSAGE(job.ok(), job.status().message());
    return;
  }
  REQUIRE_FALSE(job.ok());
  const std::string why = job.status().message();
  CHECK(why.find("lenet_hybrid.yaml") != std::string::npos);
  CHECK((why.find("no GPU is visible") != std::string::npos ||
         why.find("built without CUDA") != std::string::npos));
}

TEST_CASE("workers with different models are stopped at start-up, naming the difference") {
  Config config = Lenet();
  Config other = config;
  other.model.layers.back().out = 5;  // fc3: 5 classes on one worker
  auto sink = std::make_shared<testing::CaptureSink>();
  LocalJobOptions job;
  job.cluster.server_num = 1;
  job.cluster.worker_num = 2;
  job.config = config;
  job.make_job = [&](int index) -> std::unique_ptr<WorkerJob> {
    auto train = TrainJob::Create(index == 0 ? config : other);
    REQUIRE(train.ok());
    return std::move(*train);
  };
  job.make_logger = [sink](const std::string& name) { return testing::CaptureLogger(name, sink); };
  Status st = RunLocalJob(job);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("other PS tensors") != std::string::npos);
  CHECK(st.message().find("than worker 0") != std::string::npos);
}

TEST_CASE("the hybrid config puts the convolutions on the servers and the rest on workers") {
  auto job = TrainJob::Create(Lenet("configs/lenet_hybrid.yaml"));
  REQUIRE_MESSAGE(job.ok(), job.status().message());
  std::vector<std::string> on_servers;
  for (const TensorSpec& t : (*job)->PsTensors()) on_servers.push_back(t.name);
  CHECK(on_servers ==
        std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias"});
  CHECK((*job)->NeedsCollective());
  auto plain = TrainJob::Create(Lenet());
  REQUIRE(plain.ok());
  CHECK_FALSE((*plain)->NeedsCollective());
}

}  // namespace
}  // namespace pstrain
