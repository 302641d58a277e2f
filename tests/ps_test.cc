// The parameter-server core over real sockets: 2 servers and 3 workers as
// threads of this process. Sync averages and applies once per step; async
// applies every push exactly once; ssp bounds how far a worker runs ahead;
// bad pushes are refused without changing anything; a pull before the
// chief's init waits.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "roles/local_job.h"
#include "roles/worker/checkpointing.h"
#include "roles/worker/norm_clip.h"
#include "src/common/checkpoint_file.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

using Body = std::function<Status(WorkerContext&)>;

class FunctionJob : public WorkerJob {
 public:
  FunctionJob(std::vector<TensorSpec> tensors, Body body)
      : tensors_(std::move(tensors)), body_(std::move(body)) {}
  std::vector<TensorSpec> PsTensors() override { return tensors_; }
  Status Run(WorkerContext& context) override { return body_(context); }

 private:
  std::vector<TensorSpec> tensors_;
  Body body_;
};

const std::vector<TensorSpec> kTensors = {{"w", 1000}, {"b", 3}};

Config PsConfig(UpdateMode mode, float lr, int staleness = 0) {
  Config c;
  c.train.mode = mode;
  c.train.staleness = staleness;
  c.train.optimizer.type = OptimizerType::kSgd;
  c.train.optimizer.lr = lr;
  c.train.partition_bytes = 1024;  // "w" becomes 4 partitions over 2 servers
  return c;
}

Status RunJob(const Config& config, int servers, int workers, Body body) {
  auto sink = std::make_shared<testing::CaptureSink>();
  LocalJobOptions job;
  job.cluster.server_num = servers;
  job.cluster.worker_num = workers;
  job.config = config;
  job.make_job = [body](int) { return std::make_unique<FunctionJob>(kTensors, body); };
  job.make_logger = [sink](const std::string& name) { return testing::CaptureLogger(name, sink); };
  return RunLocalJob(job);
}

float Initial(int t, size_t i) { return (t == 0 ? 0.001f : -0.5f) * static_cast<float>(i + 1); }
float Gradient(int rank, int64_t step, size_t i) {
  return 0.01f * static_cast<float>((rank + 1) * (step + 1)) * static_cast<float>(i % 7 + 1);
}

std::vector<std::vector<float>> InitialValues() {
  std::vector<std::vector<float>> v;
  for (int t = 0; t < 2; ++t) {
    v.emplace_back(kTensors[t].elements);
    for (size_t i = 0; i < v[t].size(); ++i) v[t][i] = Initial(t, i);
  }
  return v;
}

// The chief pushes the initial values; everyone pulls them (waiting for the
// chief if need be).
Status InitAndPull(WorkerContext& ctx, std::vector<std::vector<float>>& values) {
  std::vector<std::vector<float>> init = InitialValues();
  if (ctx.rank == 0)
    for (int t = 0; t < 2; ++t) PSTRAIN_RETURN_IF_ERROR(ctx.kv->Init(t, init[t].data()).Wait());
  values.assign(2, {});
  for (int t = 0; t < 2; ++t) {
    values[t].resize(kTensors[t].elements);
    PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(t, values[t].data(), 0).Wait());
  }
  return Status::OK();
}

TEST_CASE("sync: the pulled weights equal the hand-computed averaged SGD steps") {
  constexpr int kWorkers = 3, kSteps = 5;
  constexpr float kLr = 0.1f;
  std::mutex mutex;
  std::vector<std::vector<std::vector<float>>> finals(kWorkers);
  Status st = RunJob(PsConfig(UpdateMode::kSync, kLr), 2, kWorkers, [&](WorkerContext& ctx) {
    std::vector<std::vector<float>> values;
    PSTRAIN_RETURN_IF_ERROR(InitAndPull(ctx, values));
    std::vector<std::vector<float>> grads = values;
    for (int64_t step = 0; step < kSteps; ++step) {
      for (int t = 0; t < 2; ++t) {
        for (size_t i = 0; i < grads[t].size(); ++i) grads[t][i] = Gradient(ctx.rank, step, i);
        // Push and pull together: the pull waits on the server for the update.
        KvHandle push = ctx.kv->Push(t, grads[t].data(), step);
        KvHandle pull = ctx.kv->Pull(t, values[t].data(), step + 1);
        PSTRAIN_RETURN_IF_ERROR(push.Wait());
        PSTRAIN_RETURN_IF_ERROR(pull.Wait());
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    finals[ctx.rank] = values;
    return Status::OK();
  });
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::vector<std::vector<float>> expected = InitialValues();
  for (int64_t step = 0; step < kSteps; ++step)
    for (int t = 0; t < 2; ++t)
      for (size_t i = 0; i < expected[t].size(); ++i) {
        double mean = 0;
        for (int r = 0; r < kWorkers; ++r) mean += Gradient(r, step, i);
        expected[t][i] -= kLr * static_cast<float>(mean / kWorkers);
      }
  for (int r = 0; r < kWorkers; ++r)
    for (int t = 0; t < 2; ++t)
      for (size_t i = 0; i < expected[t].size(); ++i)
        REQUIRE(finals[r][t][i] == doctest::Approx(expected[t][i]).epsilon(1e-5));
}

// train.clip_norm by hand: 3 workers push known gradients to "w" (4
// partitions over 2 servers) and "b"; each adds the same made-up
// all-reduced squares, asks the servers' shares (roles/worker/norm_clip.h),
// and sends the one factor with its pulls (the last step's is 1). The weights must be the
// hand-computed clipped SGD steps, and the norm the single-process one.
TEST_CASE(
    "clip: the global norm adds every partition's share on both servers to the "
    "all-reduced part, and every partition applies the one factor") {
  constexpr int kWorkers = 3, kSteps = 3;
  constexpr float kLr = 0.1f, kClip = 0.5f;
  constexpr double kLocalSquares = 0.04;  // as if all-reduced weights had a gradient of norm 0.2
  Config config = PsConfig(UpdateMode::kSync, kLr);
  config.train.clip_norm = kClip;
  std::mutex mutex;
  std::vector<std::vector<std::vector<float>>> finals(kWorkers);
  std::vector<std::vector<double>> norms(kWorkers);
  Status st = RunJob(config, 2, kWorkers, [&](WorkerContext& ctx) {
    std::vector<std::vector<float>> values;
    PSTRAIN_RETURN_IF_ERROR(InitAndPull(ctx, values));
    std::vector<std::vector<float>> grads = values;
    NormClip clipping(kClip), unclipped(1e6f);
    for (int64_t step = 0; step < kSteps; ++step) {
      // The last step's norm is below the clip: its factor is 1.
      NormClip& clip = step + 1 < kSteps ? clipping : unclipped;
      std::vector<KvOp> ops;
      for (int t = 0; t < 2; ++t) {
        for (size_t i = 0; i < grads[t].size(); ++i) grads[t][i] = Gradient(ctx.rank, step, i);
        ops.push_back({KvOp::Kind::kPush, t, grads[t].data(), step});
      }
      for (const KvOp& op : clip.NormRequests(ctx.kv->map(), step)) ops.push_back(op);
      PSTRAIN_RETURN_IF_ERROR(ctx.kv->Run(std::move(ops)).Wait());
      PSTRAIN_RETURN_IF_ERROR(clip.Decide(kLocalSquares, step));
      ops = clip.FactorRequests(2, step);
      for (int t = 0; t < 2; ++t) ops.push_back({KvOp::Kind::kPull, t, values[t].data(), step + 1});
      PSTRAIN_RETURN_IF_ERROR(ctx.kv->Run(std::move(ops)).Wait());
      std::lock_guard<std::mutex> lock(mutex);
      norms[ctx.rank].push_back(clip.norm());
    }
    // A second, different factor for a step already applied is refused.
    float other = unclipped.factor() / 2;
    Status twice = ctx.kv->Run({{KvOp::Kind::kClipScale, 1, &other, kSteps - 1}}).Wait();
    if (twice.ok()) return Internal("a different clip factor was taken");
    if (twice.message().find("the workers disagree on the global norm") == std::string::npos)
      return twice;
    std::lock_guard<std::mutex> lock(mutex);
    finals[ctx.rank] = values;
    return Status::OK();
  });
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::vector<std::vector<float>> expected = InitialValues();
  for (int64_t step = 0; step < kSteps; ++step) {
    std::vector<std::vector<double>> mean(2);
    double squares = kLocalSquares;
    for (int t = 0; t < 2; ++t)
      for (size_t i = 0; i < expected[t].size(); ++i) {
        double sum = 0;
        for (int r = 0; r < kWorkers; ++r) sum += Gradient(r, step, i);
        mean[t].push_back(sum / kWorkers);
        squares += mean[t].back() * mean[t].back();
      }
    const double norm = std::sqrt(squares);
    const double factor = step + 1 < kSteps ? std::min(1.0, kClip / norm) : 1.0;
    CHECK((factor < 1.0) == (step + 1 < kSteps));  // the steps before the last are clipped
    for (int r = 0; r < kWorkers; ++r) CHECK(norms[r][step] == doctest::Approx(norm).epsilon(1e-6));
    for (int t = 0; t < 2; ++t)
      for (size_t i = 0; i < expected[t].size(); ++i)
        expected[t][i] -= kLr * static_cast<float>(factor * mean[t][i]);
  }
  for (int r = 0; r < kWorkers; ++r)
    for (int t = 0; t < 2; ++t)
      for (size_t i = 0; i < expected[t].size(); ++i)
        REQUIRE(finals[r][t][i] == doctest::Approx(expected[t][i]).epsilon(1e-5));
}

TEST_CASE("async: every push is applied exactly once") {
  constexpr int kWorkers = 3, kPushes = 20;
  std::vector<float> after(kTensors[0].elements);
  Status st = RunJob(PsConfig(UpdateMode::kAsync, 1.0f), 2, kWorkers, [&](WorkerContext& ctx) {
    std::vector<std::vector<float>> values;
    PSTRAIN_RETURN_IF_ERROR(InitAndPull(ctx, values));
    std::vector<float> ones(kTensors[0].elements, static_cast<float>(ctx.rank + 1));
    for (int k = 0; k < kPushes; ++k)  // no waiting on anyone
      PSTRAIN_RETURN_IF_ERROR(ctx.kv->Push(0, ones.data(), k).Wait());
    PSTRAIN_RETURN_IF_ERROR(ctx.cluster->Barrier(BarrierGroup::kWorkers));
    if (ctx.rank == 0) return ctx.kv->Pull(0, after.data(), 0).Wait();
    return Status::OK();
  });
  REQUIRE_MESSAGE(st.ok(), st.message());
  // lr 1: w = w0 - sum of all pushes = w0 - 20 * (1 + 2 + 3).
  for (size_t i = 0; i < after.size(); ++i)
    REQUIRE(after[i] == doctest::Approx(Initial(0, i) - kPushes * 6.0f));
}

TEST_CASE("ssp: no worker runs more than `staleness` steps ahead of the slowest") {
  constexpr int kWorkers = 3, kSteps = 12, kStaleness = 2;
  std::atomic<int64_t> clocks[kWorkers] = {};
  std::atomic<int64_t> worst_lead{0};
  Status st =
      RunJob(PsConfig(UpdateMode::kSsp, 0.01f, kStaleness), 2, kWorkers, [&](WorkerContext& ctx) {
        std::vector<std::vector<float>> values;
        PSTRAIN_RETURN_IF_ERROR(InitAndPull(ctx, values));
        std::vector<float> grad(kTensors[0].elements, 1.0f);
        for (int64_t step = 0; step < kSteps; ++step) {
          if (ctx.rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(15));
          clocks[ctx.rank] = step + 1;  // before the push that the server counts
          PSTRAIN_RETURN_IF_ERROR(ctx.kv->Push(0, grad.data(), step).Wait());
          // Entering step + 1 needs the slowest to have pushed step + 1 - s.
          PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(0, values[0].data(), step + 1 - kStaleness).Wait());
          int64_t slowest = kSteps;
          for (auto& c : clocks) slowest = std::min<int64_t>(slowest, c);
          int64_t lead = (step + 1) - slowest;
          int64_t prev = worst_lead;
          while (lead > prev && !worst_lead.compare_exchange_weak(prev, lead)) {
          }
        }
        return Status::OK();
      });
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(worst_lead <= kStaleness);
  MESSAGE("largest lead over the slowest worker: " << worst_lead.load());
}

TEST_CASE("a bad push is refused naming the problem, and changes nothing") {
  Status st = RunJob(PsConfig(UpdateMode::kAsync, 1.0f), 2, 1, [&](WorkerContext& ctx) {
    std::vector<std::vector<float>> values;
    PSTRAIN_RETURN_IF_ERROR(InitAndPull(ctx, values));
    // A client whose model disagrees with the servers': "b" has 5 floats
    // instead of 3, and "nope" does not exist.
    auto wrong = PartitionMap::Build({{"b", 5}, {"nope", 4}}, 2, 1024);
    REQUIRE(wrong.ok());
    KvClient bad(ctx.loop, ctx.servers, ctx.rank, std::move(*wrong));
    std::vector<float> junk(5, 100.0f);
    Status long_push = bad.Push("b", junk.data(), 0).Wait();
    REQUIRE_FALSE(long_push.ok());
    CHECK(long_push.message().find("push of 20 bytes to 'b' partition 0, which holds 3 floats") !=
          std::string::npos);
    Status unknown = bad.Push("nope", junk.data(), 0).Wait();
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.message().find("unknown tensor 'nope'") != std::string::npos);
    CHECK(ctx.kv->Push("absent", junk.data(), 0).Wait().message() ==
          "push of unknown tensor 'absent'");
    std::vector<std::string> files;
    Status negative = ctx.kv->Save(-1, &files).Wait();
    CHECK(negative.message().find("checkpoint of step -1: steps are >= 0") != std::string::npos);
    std::vector<float> now(kTensors[1].elements);
    PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(1, now.data(), 0).Wait());
    CHECK(now == values[1]);  // nothing was applied
    return Status::OK();
  });
  REQUIRE_MESSAGE(st.ok(), st.message());
}

// Sends `body` on `conn` (a connection of `loop`) and waits for the answer.
// `bytes`, when given, go as the payload.
StatusOr<Incoming> CallOn(EventLoop* loop, const Connection::Ptr& conn, MessageBody body,
                          std::vector<uint8_t> bytes = {}) {
  Completion<StatusOr<Incoming>> answer;
  auto held = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  // Captured by value: the reply may still be inside Set() when Wait() returns.
  loop->Post([conn, body = std::move(body), answer, held]() mutable {
    conn->Call(
        std::move(body), [answer](StatusOr<Incoming> r) { answer.Set(r); },
        Payload{held->data(), held->size(), held});
  });
  return answer.Wait();
}

std::string MessageOf(const StatusOr<Incoming>& answer) {
  return answer.ok() ? "OK" : answer.status().message();
}

TEST_CASE(
    "a server serves a connection only as the worker it introduced, and checkpoints only "
    "the chief's reached steps") {
  char made[] = "/tmp/pstrain-ckpt-XXXXXX";
  REQUIRE(mkdtemp(made) != nullptr);
  const std::string dir = made;
  Config config = PsConfig(UpdateMode::kSync, 0.1f);
  config.train.checkpoint = CheckpointConfig{dir, 0, false, 3};
  Status st = RunJob(config, 1, 2, [&](WorkerContext& ctx) {
    std::vector<std::vector<float>> values;
    PSTRAIN_RETURN_IF_ERROR(InitAndPull(ctx, values));
    std::vector<float> grad(kTensors[1].elements, 0.5f);
    for (int64_t step = 0; step < 2; ++step) {
      KvHandle push = ctx.kv->Push(1, grad.data(), step);
      KvHandle pull = ctx.kv->Pull(1, values[1].data(), step + 1);
      PSTRAIN_RETURN_IF_ERROR(push.Wait());
      PSTRAIN_RETURN_IF_ERROR(pull.Wait());
    }
    const Connection::Ptr& server = ctx.servers[0];
    if (ctx.rank == 1) {
      // A worker cannot act for another, nor ask for checkpoints.
      CHECK(MessageOf(CallOn(ctx.loop, server, PushRequest{"b", 0, 0, 2})) ==
            "the request names worker 0, but this connection is worker 1");
      CHECK(MessageOf(CallOn(ctx.loop, server, SaveRequest{2})) ==
            "worker 1 asked for a checkpoint; only the chief (worker 0) may");
    } else {
      // The chief, for a step no worker has reached: nothing is written.
      CHECK(MessageOf(CallOn(ctx.loop, server, SaveRequest{999999999999})) ==
            "checkpoint of step 999999999999: the job has reached step 2");
      CHECK_FALSE(std::filesystem::exists(CheckpointStepDir(dir, 999999999999)));
      CHECK(MessageOf(CallOn(ctx.loop, server, SaveRequest{2})) == "OK");
      // A connection that never said Hello is served nothing.
      Completion<StatusOr<Connection::Ptr>> connected;
      const std::string peer = server->peer();
      const auto colon = peer.rfind(':');
      ctx.loop->Post([&ctx, peer, colon, connected] {
        Connection::Connect(ctx.loop, ctx.log, peer.substr(0, colon),
                            static_cast<uint16_t>(std::stoi(peer.substr(colon + 1))),
                            [connected](StatusOr<Connection::Ptr> c) {
                              if (c.ok()) (*c)->Start(nullptr, nullptr);
                              connected.Set(c);
                            });
      });
      auto stranger = connected.Wait();
      REQUIRE(stranger.ok());
      CHECK(MessageOf(CallOn(ctx.loop, *stranger, PullRequest{"b", 0, 0, 0, 3})) ==
            "PullRequest before Hello: a worker introduces itself first");
      // Nor one whose Hello names another generation: a worker replaced
      // while it was cut off, whose rank another node holds now.
      Hello stale;
      stale.node.node_id = "cut-off";
      stale.node.role = Role::kWorker;
      stale.node.rank = 1;
      stale.generation = 5;
      CHECK(MessageOf(CallOn(ctx.loop, *stranger, stale)) ==
            "worker rank 1 (node id cut-off) registered for generation 5, this node for "
            "generation 0: it was replaced, or the job went on without it");
      CHECK(MessageOf(CallOn(ctx.loop, *stranger, PullRequest{"b", 0, 1, 0, 3})) ==
            "PullRequest before Hello: a worker introduces itself first");
      ctx.loop->Post([c = *stranger] { c->Close(Aborted("test over")); });
    }
    return ctx.cluster->Barrier(BarrierGroup::kWorkers);
  });
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::filesystem::remove_all(dir);
}

TEST_CASE("a pull before the chief's init waits for it") {
  std::atomic<bool> pull_was_pending{false};
  Completion<bool> pull_issued;
  Status st = RunJob(PsConfig(UpdateMode::kSync, 0.1f), 1, 2, [&](WorkerContext& ctx) {
    std::vector<std::vector<float>> init = InitialValues();
    if (ctx.rank == 0) {
      pull_issued.Wait();  // worker 1 has asked and got nothing yet
      for (int t = 0; t < 2; ++t) PSTRAIN_RETURN_IF_ERROR(ctx.kv->Init(t, init[t].data()).Wait());
      return Status::OK();
    }
    std::vector<float> got(kTensors[0].elements, -7.0f);
    KvHandle pull = ctx.kv->Pull(0, got.data(), 0);
    // Nothing can answer it yet: the chief has not pushed its values.
    pull_was_pending = !pull.IsDone();
    pull_issued.Set(true);
    PSTRAIN_RETURN_IF_ERROR(pull.Wait());
    CHECK(got == init[0]);
    return Status::OK();
  });
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(pull_was_pending);
}

// Trains `total` sync steps with momentum from wherever the checkpoint dir
// says, checkpointing every 3 steps; worker 1 "crashes" after `crash_after`
// steps (0: never). Returns the chief's final values (empty on failure).
std::vector<std::vector<float>> TrainWithCheckpoints(const std::string& dir, bool resume,
                                                     int64_t total, int64_t crash_after,
                                                     Status* status) {
  Config config = PsConfig(UpdateMode::kSync, 0.05f);
  config.train.optimizer.type = OptimizerType::kMomentum;
  config.train.optimizer.momentum = 0.9f;
  config.train.checkpoint = CheckpointConfig{dir, 3, resume, 2};
  std::vector<std::vector<float>> result;
  *status = RunJob(config, 2, 2, [&](WorkerContext& ctx) {
    auto start = ResumeStep(*ctx.config, ctx.log);
    if (!start.ok()) return start.status();
    std::vector<std::vector<float>> values;
    PSTRAIN_RETURN_IF_ERROR(InitAndPull(ctx, values));
    std::vector<std::vector<float>> grads = values;
    for (int64_t step = *start; step < total; ++step) {
      for (int t = 0; t < 2; ++t) {
        // The gradient depends on the weights: a wrong resume would show.
        for (size_t i = 0; i < grads[t].size(); ++i)
          grads[t][i] = 0.1f * values[t][i] + Gradient(ctx.rank, step, i);
        PSTRAIN_RETURN_IF_ERROR(
            ctx.kv->PushPull(t, grads[t].data(), step, values[t].data(), step + 1).Wait());
      }
      if (ctx.rank == 0 && CheckpointDue(*ctx.config, step + 1, step + 1 == total))
        PSTRAIN_RETURN_IF_ERROR(SaveCheckpoint(ctx, step + 1));
      if (ctx.rank == 1 && step + 1 == crash_after) return Aborted("simulated crash");
    }
    if (ctx.rank == 0) result = values;
    return Status::OK();
  });
  return result;
}

std::string TempDir() {
  char name[] = "/tmp/pstrain-ckpt-XXXXXX";
  REQUIRE(mkdtemp(name) != nullptr);
  return name;
}

TEST_CASE("checkpoint, kill every node, resume: the weights equal an uninterrupted run's") {
  std::string reference_dir = TempDir(), dir = TempDir();
  Status st;
  auto reference = TrainWithCheckpoints(reference_dir, false, 10, 0, &st);
  REQUIRE_MESSAGE(st.ok(), st.message());

  TrainWithCheckpoints(dir, false, 10, 7, &st);
  REQUIRE(st.code() == StatusCode::kAborted);  // the job died after step 7
  auto newest = FindNewestCheckpoint(dir);
  REQUIRE(newest.ok());
  CHECK(newest->step == 6);

  SUBCASE("from the newest checkpoint") {
    auto resumed = TrainWithCheckpoints(dir, true, 10, 0, &st);
    REQUIRE_MESSAGE(st.ok(), st.message());
    REQUIRE(resumed.size() == 2);
    CHECK(resumed == reference);
  }
  SUBCASE("a damaged newest checkpoint is refused and the older one used") {
    std::string victim = CheckpointStepDir(dir, 6) + "/server-1.ckpt";
    {
      std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(40);
      f.put('\x7f');
    }
    std::vector<std::string> skipped;
    auto fallback = FindNewestCheckpoint(dir, &skipped);
    REQUIRE(fallback.ok());
    CHECK(fallback->step == 3);
    REQUIRE(skipped.size() == 1);
    CHECK(skipped[0].find("server-1.ckpt") != std::string::npos);
    auto resumed = TrainWithCheckpoints(dir, true, 10, 0, &st);
    REQUIRE_MESSAGE(st.ok(), st.message());
    CHECK(resumed == reference);
  }
  std::filesystem::remove_all(reference_dir);
  std::filesystem::remove_all(dir);
}

std::vector<uint8_t> FloatBytes(float f) {
  std::vector<uint8_t> bytes(sizeof f);
  std::memcpy(bytes.data(), &f, sizeof f);
  return bytes;
}

// The server's side of train.clip_norm, message by message: a factor is
// taken only for the held step and only in (0, 1], once (a second one
// must be the same); a norm is answered for a step gathered whole; a
// server whose config clips nothing refuses both.
TEST_CASE("clip: a server takes one factor in (0, 1] for the held step, and answers its norm") {
  constexpr float kLr = 0.1f;
  for (const bool clips : {true, false}) {
    CAPTURE(clips);
    Config config = PsConfig(UpdateMode::kSync, kLr);
    if (clips) config.train.clip_norm = 1.0f;
    Status st = RunJob(config, 1, 1, [&](WorkerContext& ctx) {
      std::vector<std::vector<float>> values;
      PSTRAIN_RETURN_IF_ERROR(InitAndPull(ctx, values));
      const Connection::Ptr& server = ctx.servers[0];
      auto factor = [&](int64_t step, std::vector<uint8_t> bytes) {
        return MessageOf(CallOn(ctx.loop, server,
                                PushRequest{"b", 0, 0, step, PushKind::kClipScale},
                                std::move(bytes)));
      };
      PullRequest norm{"b", 0, 0, 0, 3};
      norm.norm = true;
      if (!clips) {
        CHECK(factor(0, FloatBytes(0.5f)) ==
              "clip factor for 'b' partition 0: this server's config sets no train.clip_norm");
        CHECK(MessageOf(CallOn(ctx.loop, server, norm)) ==
              "norm of 'b' partition 0: this server's config sets no train.clip_norm");
        return Status::OK();
      }
      CHECK(factor(0, FloatBytes(0.5f)) ==
            "a clip factor for step 0 of 'b' partition 0, which gathers step 0");
      const std::vector<float> grad = {3.0f, 4.0f, 12.0f};  // norm 13
      PSTRAIN_RETURN_IF_ERROR(ctx.kv->Push(1, grad.data(), 0).Wait());
      StatusOr<Incoming> answer = CallOn(ctx.loop, server, norm);
      REQUIRE(answer.ok());
      CHECK(std::get<PullReply>(answer->message.body).squared_norm == 169.0);
      CHECK(factor(0, std::vector<uint8_t>(8)) ==
            "clip factor for 'b' partition 0: 8 bytes, expected 4");
      for (float bad : {0.0f, 1.5f, -0.5f, std::nanf("")})
        CHECK(factor(0, FloatBytes(bad)).find("expected one in (0, 1]") != std::string::npos);
      CHECK(factor(0, FloatBytes(0.5f)) == "OK");
      CHECK(factor(0, FloatBytes(0.5f)) == "OK");  // every worker sends it
      CHECK(factor(0, FloatBytes(0.25f)) ==
            "a clip factor of 0.25 for step 0 of 'b' partition 0, which was clipped by 0.5: the "
            "workers disagree on the global norm");
      std::vector<float> now(3);
      PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(1, now.data(), 1).Wait());
      for (size_t i = 0; i < now.size(); ++i)
        CHECK(now[i] == doctest::Approx(values[1][i] - kLr * 0.5f * grad[i]));
      return Status::OK();
    });
    REQUIRE_MESSAGE(st.ok(), st.message());
  }
}

}  // namespace
}  // namespace pstrain
