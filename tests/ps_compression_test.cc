// The PS path of threshold compression (roles/worker/ps_compression.h,
// roles/worker/ps_averaging.h): threshold-encoded pushes train as well as
// dense ones with far fewer bytes; a server refuses a bad message naming it,
// applies nothing, and goes on serving; mode average pushes nothing between
// rounds, leaves every worker with the same weights after one, and resumes
// from its checkpoints; momentum tensors are momentum-corrected (momentum on
// the workers, sgd on the servers); a worker's own state file restores its
// encoders exactly and a bad one is refused, changing nothing.
#include "roles/worker/ps_compression.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "comm/transport/messages.h"
#include "optim/threshold_codec.h"
#include "roles/local_job.h"
#include "roles/worker/ps_state.h"
#include "roles/worker/trainer.h"
#include "tests/threshold_oracle.h"
#include "tests/train_util.h"

namespace pstrain {
namespace {

using testing::ClickData;
using testing::TrainOutcome;

// Logistic regression on synthetic click data: a 65536-row wide tensor
// (most of whose gradient is zero each step) and a small dense layer, all
// PS dense tensors.
Config ClickConfig(const ClickData& data, int64_t steps) {
  Config config = testing::ClickLrConfig(data, steps);
  config.train.log_every = 20;
  return config;
}

// The codec past its warm-up, where a long job spends most of its steps
// (compression_warmup_test covers the warm-up's dense first epochs).
CompressionConfig Threshold(float tau) {
  CompressionConfig c;
  c.type = CompressionType::kThreshold;
  c.threshold = tau;
  c.warmup_epochs = 0;
  return c;
}

TEST_CASE("threshold-encoded pushes train like dense ones with 50x fewer bytes per step") {
  ClickData data(20000, 4000);
  Config dense = ClickConfig(data, 240);  // about 3 epochs of 2 x 128
  Config compressed = dense;
  compressed.train.compression = Threshold(1e-3f);
  TrainOutcome a = testing::TrainLocally(dense, 2, 2);
  TrainOutcome b = testing::TrainLocally(compressed, 2, 2);
  REQUIRE_MESSAGE(a.status.ok(), a.status.message());
  REQUIRE_MESSAGE(b.status.ok(), b.status.message());
  MESSAGE("AUC dense ", a.stats.test_metric, ", compressed ", b.stats.test_metric);
  CHECK(a.stats.test_metric > 0.65);
  CHECK(b.stats.test_metric > a.stats.test_metric - 0.03);
  // Dense: exactly the tensors' floats each step.
  const int64_t floats = 65536 + 13 + 1;
  CHECK(a.stats.push_bytes == a.stats.push_dense_bytes);
  CHECK(a.stats.push_dense_bytes == a.stats.steps * floats * 4);
  CHECK(a.stats.compression.messages == 0);
  CHECK(b.stats.push_dense_bytes == a.stats.push_dense_bytes);
  const double ratio = static_cast<double>(b.stats.push_dense_bytes) / b.stats.push_bytes;
  MESSAGE("pushed bytes per step: dense ", a.stats.push_dense_bytes / a.stats.steps,
          ", compressed ", b.stats.push_bytes / b.stats.steps, " (", ratio, "x)");
  CHECK(ratio >= 50);
  CHECK(b.stats.compression.messages > 0);
  CHECK(b.stats.compression.density() > 0);
  // The step lines tell the user what compression did.
  CHECK_FALSE(b.sink->Matching("bytes/step to the servers").empty());
  CHECK_FALSE(b.sink->Matching(", density ").empty());
}

TEST_CASE("a push's encoding and kind survive the wire; an encoded init is refused") {
  for (PushKind kind : {PushKind::kGradient, PushKind::kDelta}) {
    PushEncoding encoding =
        kind == PushKind::kGradient ? PushEncoding::kThreshold : PushEncoding::kDense;
    Message sent{7, false, PushRequest{"fc1.weight", 2, 1, 9, kind, encoding}};
    std::vector<uint8_t> bytes = EncodeHeader(sent);
    auto got = DecodeHeader(bytes.data(), bytes.size());
    REQUIRE_MESSAGE(got.ok(), got.status().message());
    const auto& push = std::get<PushRequest>(got->body);
    CHECK(push.kind == kind);
    CHECK(push.encoding == encoding);
    CHECK(push.clock == 9);
  }
  std::vector<uint8_t> bytes = EncodeHeader(
      {7, false, PushRequest{"w", 0, 0, 0, PushKind::kInit, PushEncoding::kThreshold}});
  auto got = DecodeHeader(bytes.data(), bytes.size());
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().message() == "only gradient pushes may be threshold-encoded");
}

// A worker job made of one function, for the hand-made messages below.
class FunctionJob : public WorkerJob {
 public:
  FunctionJob(std::vector<TensorSpec> tensors, std::function<Status(WorkerContext&)> body)
      : tensors_(std::move(tensors)), body_(std::move(body)) {}
  std::vector<TensorSpec> PsTensors() override { return tensors_; }
  Status Run(WorkerContext& context) override { return body_(context); }

 private:
  std::vector<TensorSpec> tensors_;
  std::function<Status(WorkerContext&)> body_;
};

std::vector<uint8_t> Header(uint8_t format, uint32_t n, float tau, uint32_t count) {
  std::vector<uint8_t> m(kThresholdHeaderBytes, 0);
  m[0] = format;
  m[1] = 1;
  std::memcpy(&m[4], &n, 4);
  std::memcpy(&m[8], &tau, 4);
  std::memcpy(&m[12], &count, 4);
  return m;
}

TEST_CASE(
    "a bad threshold message gets an error reply, changes nothing, and the server serves on") {
  constexpr int64_t kElements = 100;
  Config config;
  config.train.mode = UpdateMode::kAsync;
  config.train.optimizer.type = OptimizerType::kSgd;
  config.train.optimizer.lr = 1.0f;
  auto sink = std::make_shared<testing::CaptureSink>();
  LocalJobOptions job = testing::QuietJob(config, 1, 1, sink);
  job.make_job = [](int) {
    return std::make_unique<FunctionJob>(
        std::vector<TensorSpec>{{"w", kElements}}, [](WorkerContext& ctx) -> Status {
          std::vector<float> init(kElements, 1.0f), now(kElements);
          PSTRAIN_RETURN_IF_ERROR(ctx.kv->Init(0, init.data()).Wait());
          auto push = [&](std::vector<uint8_t> message) {
            std::vector<std::vector<uint8_t>> messages{std::move(message)};
            KvOp op{KvOp::Kind::kPush, 0, init.data(), 0, &messages};
            return ctx.kv->Run({op}).Wait();
          };
          // Header of a 1-element sparse message: index 3, +tau.
          std::vector<uint8_t> good = Header(1, kElements, 0.25f, 1);
          good.push_back(3 << 1);
          std::vector<uint8_t> wrong_n = Header(1, 7, 0.25f, 1);  // not this partition's n
          wrong_n.push_back(3 << 1);
          std::vector<uint8_t> past_end = Header(1, kElements, 0.25f, 1);
          past_end.push_back(0xc8);  // varint 200: index 100, one past the end
          past_end.push_back(0x01);
          std::vector<uint8_t> truncated(good.begin(), good.begin() + 10);
          std::vector<uint8_t> nan_tau = Header(1, kElements, std::nanf(""), 1);
          nan_tau.push_back(3 << 1);
          for (const std::vector<uint8_t>* bad : {&wrong_n, &past_end, &truncated, &nan_tau}) {
            Status st = push(*bad);
            CHECK_FALSE(st.ok());
            CHECK(st.message().find("threshold-encoded push to 'w' partition 0") !=
                  std::string::npos);
            PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(0, now.data(), 0).Wait());
            CHECK(now == init);  // nothing applied
          }
          // The server still serves: a good message is applied (SGD, lr 1).
          PSTRAIN_RETURN_IF_ERROR(push(good));
          PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(0, now.data(), 0).Wait());
          for (int64_t i = 0; i < kElements; ++i) CHECK(now[i] == (i == 3 ? 0.75f : 1.0f));
          return Status::OK();
        });
  };
  Status st = RunLocalJob(job);
  CHECK_MESSAGE(st.ok(), st.message());
}

TEST_CASE("sync: the servers apply the mean of the workers' +-tau messages, residuals kept") {
  constexpr int kWorkers = 2, kSteps = 3;
  constexpr int64_t kElements = 100;  // 7 partitions of up to 16 floats over 2 servers
  constexpr float kTau = 0.015f;
  Config config;
  config.train.mode = UpdateMode::kSync;
  config.train.optimizer.type = OptimizerType::kSgd;
  config.train.optimizer.lr = 1.0f;
  config.train.partition_bytes = 64;
  config.train.compression = Threshold(kTau);
  config.train.compression.adaptive = false;
  // The rule at a fixed tau, written out below: no warm-up picking tau.
  config.train.compression.warmup_epochs = 0;
  auto gradient = [](int rank, int64_t i) {
    return 0.01f * static_cast<float>(rank + 1) * static_cast<float>(i % 5 - 2);
  };
  std::mutex mutex;
  std::vector<std::vector<float>> finals(kWorkers);
  auto sink = std::make_shared<testing::CaptureSink>();
  LocalJobOptions job = testing::QuietJob(config, 2, kWorkers, sink);
  job.make_job = [&](int) {
    return std::make_unique<FunctionJob>(
        std::vector<TensorSpec>{{"w", kElements}}, [&](WorkerContext& ctx) -> Status {
          std::vector<float> values(kElements, 1.0f), grad(kElements);
          if (ctx.rank == 0) PSTRAIN_RETURN_IF_ERROR(ctx.kv->Init(0, values.data()).Wait());
          PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(0, values.data(), 0).Wait());
          PsCompression compression(config, ctx.kv->map());
          REQUIRE(compression.Compresses(0));
          for (int64_t step = 0; step < kSteps; ++step) {
            for (int64_t i = 0; i < kElements; ++i) grad[i] = gradient(ctx.rank, i);
            KvOp push{KvOp::Kind::kPush, 0, grad.data(), step, compression.Encode(0, grad.data())};
            KvOp pull{KvOp::Kind::kPull, 0, values.data(), step + 1};
            PSTRAIN_RETURN_IF_ERROR(ctx.kv->Run({push, pull}).Wait());
          }
          std::lock_guard<std::mutex> lock(mutex);
          finals[ctx.rank] = values;
          return Status::OK();
        });
  };
  Status st = RunLocalJob(job);
  REQUIRE_MESSAGE(st.ok(), st.message());
  // The rule (tests/threshold_oracle.h) without momentum: each worker adds
  // its gradient to its residual and sends +-tau where the residual reached
  // tau; the server takes the mean.
  testing::ThresholdRun run =
      testing::MakeThresholdRun(kWorkers, kSteps, kElements, kTau, config.train.optimizer,
                                [&](int rank, int64_t, int64_t i) { return gradient(rank, i); });
  const std::vector<float> expected = testing::ThresholdOracle(run).weights;
  for (int r = 0; r < kWorkers; ++r)
    for (int64_t i = 0; i < kElements; ++i)
      REQUIRE(finals[r][i] == doctest::Approx(expected[i]).epsilon(1e-6));
  // Not dense SGD: some of the gradient still waits in the residuals.
  double held_back = 0;
  for (int64_t i = 0; i < kElements; ++i) {
    const float dense = 1.0f - kSteps * (gradient(0, i) + gradient(1, i)) / 2;
    held_back = std::max(held_back, static_cast<double>(std::fabs(finals[0][i] - dense)));
  }
  CHECK(held_back > 0.005);
}

// Momentum correction (roles/worker/ps_compression.h): for a momentum tensor the
// worker encodes u = m * u + g (nesterov: g + m * u), zeroes u where the
// message sent, and the server runs sgd (lr, schedule, weight decay) on the
// mean of the messages. Checked against that rule written out
// (tests/threshold_oracle.h), for plain and nesterov momentum.
TEST_CASE("momentum correction: workers encode masked momentum, the server runs sgd") {
  constexpr int kWorkers = 2, kSteps = 8;
  constexpr int64_t kElements = 100;  // 7 partitions of up to 16 floats over 2 servers
  constexpr float kTau = 0.02f, kM = 0.9f, kLr = 0.5f, kDecay = 0.1f;
  auto gradient = [](int rank, int64_t step, int64_t i) {
    return 0.01f * static_cast<float>(rank + 1) * static_cast<float>((i + step) % 5 - 2);
  };
  for (bool nesterov : {false, true}) {
    CAPTURE(nesterov);
    Config config;
    config.train.mode = UpdateMode::kSync;
    config.train.optimizer.type = OptimizerType::kMomentum;
    config.train.optimizer.momentum = kM;
    config.train.optimizer.nesterov = nesterov;
    config.train.optimizer.lr = kLr;
    config.train.optimizer.weight_decay = kDecay;
    config.train.optimizer.lr_decay_steps = 4;  // lr halves after step 4
    config.train.optimizer.lr_decay = 0.5f;
    config.train.partition_bytes = 64;
    config.train.compression = Threshold(kTau);
    config.train.compression.adaptive = false;
    // The rule at a fixed tau, written out below: no warm-up picking tau.
    config.train.compression.warmup_epochs = 0;
    REQUIRE(MomentumCorrected(config, "w"));
    CHECK(CorrectedOptimizerFor(config, "w").type == OptimizerType::kSgd);
    CHECK(CorrectedOptimizerFor(config, "w").weight_decay == kDecay);
    std::mutex mutex;
    std::vector<std::vector<float>> finals(kWorkers), momenta(kWorkers);
    auto sink = std::make_shared<testing::CaptureSink>();
    LocalJobOptions job = testing::QuietJob(config, 2, kWorkers, sink);
    job.make_job = [&](int) {
      return std::make_unique<FunctionJob>(
          std::vector<TensorSpec>{{"w", kElements}}, [&](WorkerContext& ctx) -> Status {
            std::vector<float> values(kElements, 1.0f), grad(kElements);
            if (ctx.rank == 0) PSTRAIN_RETURN_IF_ERROR(ctx.kv->Init(0, values.data()).Wait());
            PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(0, values.data(), 0).Wait());
            PsCompression compression(config, ctx.kv->map());
            REQUIRE(compression.momentum(0) != nullptr);
            for (int64_t step = 0; step < kSteps; ++step) {
              for (int64_t i = 0; i < kElements; ++i) grad[i] = gradient(ctx.rank, step, i);
              KvOp push{KvOp::Kind::kPush, 0, grad.data(), step,
                        compression.Encode(0, grad.data())};
              KvOp pull{KvOp::Kind::kPull, 0, values.data(), step + 1};
              PSTRAIN_RETURN_IF_ERROR(ctx.kv->Run({push, pull}).Wait());
            }
            std::lock_guard<std::mutex> lock(mutex);
            finals[ctx.rank] = values;
            momenta[ctx.rank].assign(compression.momentum(0), compression.momentum(0) + kElements);
            return Status::OK();
          });
    };
    Status st = RunLocalJob(job);
    REQUIRE_MESSAGE(st.ok(), st.message());
    // The rule (tests/threshold_oracle.h).
    testing::ThresholdRun run = testing::MakeThresholdRun(kWorkers, kSteps, kElements, kTau,
                                                          config.train.optimizer, gradient);
    const testing::ThresholdOutcome rule = testing::ThresholdOracle(run);
    const std::vector<float>& expected = rule.weights;
    const std::vector<std::vector<float>>& u = rule.u;
    const int64_t masked = rule.masked;
    CHECK(masked > 50);  // the stream does send, and masking changes u
    for (int r = 0; r < kWorkers; ++r) {
      for (int64_t i = 0; i < kElements; ++i) {
        REQUIRE(finals[r][i] == doctest::Approx(expected[i]).epsilon(1e-6));
        REQUIRE(momenta[r][i] == doctest::Approx(u[r][i]).epsilon(1e-6));
      }
    }
  }
}

// Every worker's TrainJob, kept to compare their weights.
class KeepAll : public WorkerJob {
 public:
  KeepAll(std::unique_ptr<TrainJob> job, std::vector<std::vector<std::vector<float>>>* weights,
          std::vector<TrainStats>* stats, std::mutex* mutex)
      : job_(std::move(job)), weights_(weights), stats_(stats), mutex_(mutex) {}
  std::vector<TensorSpec> PsTensors() override { return job_->PsTensors(); }
  bool NeedsCollective() override { return job_->NeedsCollective(); }
  Status Run(WorkerContext& ctx) override {
    Status st = job_->Run(ctx);
    std::lock_guard<std::mutex> lock(*mutex_);
    (*weights_)[ctx.rank] = job_->Weights();
    (*stats_)[ctx.rank] = job_->stats();
    return st;
  }

 private:
  std::unique_ptr<TrainJob> job_;
  std::vector<std::vector<std::vector<float>>>* weights_;
  std::vector<TrainStats>* stats_;
  std::mutex* mutex_;
};

Config Averaging(const ClickData& data, int64_t steps, int every) {
  Config config = ClickConfig(data, steps);
  config.train.mode = UpdateMode::kAverage;
  config.train.average_every = every;
  // Plain SGD: the workers' local optimizers hold no state that a
  // checkpoint would have to carry (see docs/parameter-servers.md).
  config.train.optimizer.type = OptimizerType::kSgd;
  config.train.optimizer.lr = 0.5f;
  return config;
}

TEST_CASE("mode average: nothing is pushed between rounds, and every worker ends a round equal") {
  ClickData data(8000, 2000);
  constexpr int kWorkers = 2, kEvery = 4;
  constexpr int64_t kSteps = 30;  // 7 full rounds and a last one of 2 steps
  Config config = Averaging(data, kSteps, kEvery);
  std::vector<std::vector<std::vector<float>>> weights(kWorkers);
  std::vector<TrainStats> stats(kWorkers);
  std::mutex mutex;
  auto sink = std::make_shared<testing::CaptureSink>();
  LocalJobOptions job = testing::QuietJob(config, 2, kWorkers, sink);
  job.make_job = [&](int) -> std::unique_ptr<WorkerJob> {
    auto train = TrainJob::Create(config);
    REQUIRE_MESSAGE(train.ok(), train.status().message());
    return std::make_unique<KeepAll>(std::move(*train), &weights, &stats, &mutex);
  };
  Status st = RunLocalJob(job);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const int64_t dense_step = (65536 + 13 + 1) * 4;
  const int64_t rounds = (kSteps + kEvery - 1) / kEvery;
  for (int r = 0; r < kWorkers; ++r) {
    CHECK(stats[r].steps == kSteps);
    CHECK(stats[r].push_bytes == rounds * dense_step);  // one delta per round, none between
    CHECK(weights[r] == weights[0]);                    // bit for bit after the last round
  }
  // The workers trained apart between rounds: the average moved the weights.
  CHECK(stats[0].test_metric > 0.6);
}

TEST_CASE("mode average: a resumed job ends with the weights of an uninterrupted one") {
  ClickData data(8000, 0);
  Config config = Averaging(data, 32, 4);
  config.data.test.clear();
  char dir[] = "/tmp/pstrain-average-ckpt-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  testing::ResumedRun two = testing::TrainInTwoJobs(config, 2, 2, 16, 8, dir);
  TrainOutcome whole = testing::TrainLocally(config, 2, 2);
  std::filesystem::remove_all(dir);
  REQUIRE_MESSAGE(two.first.status.ok(), two.first.status.message());
  REQUIRE_MESSAGE(two.resumed.status.ok(), two.resumed.status.message());
  REQUIRE_MESSAGE(whole.status.ok(), whole.status.message());
  CHECK(two.resumed.stats.steps == 16);
  CHECK(testing::LargestDifference(two.resumed, whole) == 0.0);

  // A checkpoint between rounds would hold no consistent state: refused.
  config.train.checkpoint = CheckpointConfig{};
  config.train.checkpoint->dir = "/tmp/unused";
  config.train.checkpoint->every_steps = 6;
  auto refused = TrainJob::Create(config);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("every_steps 6 is not a multiple of "
                                        "train.average_every 4") != std::string::npos);
}

// The sections State() gives, flattened, to compare two workers' state.
std::string StateBytes(const PsCompression& c) {
  std::string out;
  for (const Section& s : c.State()) out += s.name + std::string(s.bytes.begin(), s.bytes.end());
  return out;
}

TEST_CASE("a worker's PS state file restores its encoders exactly; a bad one changes nothing") {
  Config config;
  config.train.compression = Threshold(0.05f);
  config.train.optimizer.type = OptimizerType::kMomentum;
  config.train.optimizer.momentum = 0.9f;
  auto map = PartitionMap::Build({{"w", 3000}, {"b", 10}}, 2, 4096);
  REQUIRE(map.ok());
  PsCompression sent(config, *map), resumed(config, *map), fresh(config, *map);
  std::vector<float> g(3000);
  for (int step = 0; step < 5; ++step) {
    for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.37f * i + step) * 0.03f;
    sent.Encode(0, g.data());
  }
  const std::string zeros = StateBytes(fresh);
  char dir[] = "/tmp/pstrain-ps-state-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string path = std::string(dir) + "/" + PsWorkerStateFileName(1);
  REQUIRE(WritePsWorkerState(dir, 1, 5, &sent, nullptr).ok());

  SUBCASE("round trip: the next messages are the same bytes") {
    REQUIRE(ReadPsWorkerState(path, 5, &resumed, nullptr).ok());
    CHECK(StateBytes(resumed) == StateBytes(sent));
    CHECK(StateBytes(resumed) != zeros);
    CHECK(*resumed.Encode(0, g.data()) == *sent.Encode(0, g.data()));
  }
  SUBCASE("another step's file") {
    Status st = ReadPsWorkerState(path, 6, &fresh, nullptr);
    CHECK(st.message().find("not the file of step 6") != std::string::npos);
  }
  SUBCASE("a residual that is not finite, in a file whose checksum is right") {
    std::vector<Section> state = sent.State();
    const std::string meta = "ps worker state of step 5";
    std::vector<SectionView> views = {{"meta", meta.data(), meta.size()}};
    for (Section& s : state) {
      if (s.name == "encoder/w/1") {
        const float nan = std::nanf("");
        std::memcpy(s.bytes.data() + 12 + 4 * 7, &nan, sizeof(nan));  // after tau, count
      }
      views.push_back({s.name, s.bytes.data(), s.bytes.size()});
    }
    REQUIRE(WriteCheckpointFile(path, views).ok());
    Status st = ReadPsWorkerState(path, 5, &fresh, nullptr);
    CHECK(st.message().find("encoder/w/1: encoder residual: element 7 is nan") !=
          std::string::npos);
    CHECK(StateBytes(fresh) == zeros);  // encoder/w/0 came first, and was not restored
  }
  SUBCASE("a file of another model") {
    auto other = PartitionMap::Build({{"w", 2000}, {"b", 10}}, 2, 4096);
    REQUIRE(other.ok());
    PsCompression smaller(config, *other);
    Status st = ReadPsWorkerState(path, 5, &smaller, nullptr);
    CHECK(st.message().find("section 'momentum/w' has 12000 bytes, the model needs 8000") !=
          std::string::npos);
    CHECK(st.message().find(path) != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain
