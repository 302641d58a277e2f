// Moving a partition between servers while the job runs
// (roles/server/handoff.h): 2 servers and 2 workers as threads of this
// process, sync. After a few steps the chief moves every partition of
// server 0 to server 1; the other worker still routes them to server 0,
// whose refusal (Moved) sends each of its requests to server 1. Every
// update is applied exactly once: the final weights equal, bit for bit,
// those of the same job without the move, with the optimizer's state moved
// along (Adam). Moved by hand, the state reaches server 1 only after the
// other worker's requests did: they wait there and are taken once it
// comes. Only the chief moves partitions. Async: partitions moved while
// both workers push lose and repeat no push. The state travels checked
// whole.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "comm/transport/connection.h"
#include "roles/local_job.h"
#include "roles/server/handoff_codec.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

const std::vector<TensorSpec> kTensors = {{"w", 1000}, {"b", 3}};
constexpr int kWorkers = 2, kSteps = 8, kMoveAt = 3;

using Body = std::function<Status(WorkerContext&)>;

class FunctionJob : public WorkerJob {
 public:
  explicit FunctionJob(Body body) : body_(std::move(body)) {}
  std::vector<TensorSpec> PsTensors() override { return kTensors; }
  Status Run(WorkerContext& context) override { return body_(context); }

 private:
  Body body_;
};

// Runs the job: 2 servers and kWorkers workers, each worker running `body`.
Status RunJob(const Config& config, const Body& body) {
  auto sink = std::make_shared<testing::CaptureSink>();
  LocalJobOptions job;
  job.cluster.server_num = 2;
  job.cluster.worker_num = kWorkers;
  job.config = config;
  job.make_logger = [sink](const std::string& name) { return testing::CaptureLogger(name, sink); };
  job.make_job = [body](int) { return std::make_unique<FunctionJob>(body); };
  return RunLocalJob(job);
}

Config MoveConfig(OptimizerType optimizer) {
  Config c;
  c.train.mode = UpdateMode::kSync;
  c.train.optimizer.type = optimizer;
  c.train.optimizer.lr = 0.05f;
  c.train.partition_bytes = 1024;  // "w" becomes 4 partitions over 2 servers
  return c;
}

float Gradient(int rank, int64_t step, size_t i) {
  return 0.01f * static_cast<float>((rank + 1) * (step + 1)) * static_cast<float>(i % 7 + 1) -
         0.02f;
}

// How the chief moves server 0's partitions to server 1 after step
// kMoveAt - 1: not at all, with KvClient::MovePartition, or by hand, its
// state sent to server 1 only once the other worker's requests are there.
enum class Move { kNone, kClient, kByHand };

// One request from the chief to server `rank`, on the worker's loop.
StatusOr<Incoming> CallServer(WorkerContext& ctx, int rank, MessageBody body, Buffer payload = {}) {
  Completion<StatusOr<Incoming>> reply;
  Connection::Ptr server = ctx.servers[rank];
  ctx.loop->Post([server, body = std::move(body), payload, reply]() mutable {
    server->Call(
        std::move(body), [reply](StatusOr<Incoming> r) { reply.Set(std::move(r)); },
        Payload{payload.data, static_cast<size_t>(payload.size), payload.owner});
  });
  return reply.Wait();
}

// The three steps of roles/server/handoff.h, with the other worker let go
// between the hand-off and the take-over.
Status MoveByHand(WorkerContext& ctx, int tensor, const Partition& p) {
  const std::string& name = ctx.kv->map().tensors()[tensor].name;
  auto expected = CallServer(ctx, 1, TakeOverRequest{name, p.part, 1, true, p.elements});
  if (!expected.ok()) return expected.status();
  auto handed = CallServer(ctx, 0, HandOffRequest{name, p.part, 1, 1});
  if (!handed.ok()) return handed.status();
  if (!std::holds_alternative<HandOffReply>(handed->message.body))
    return Internal("a hand-off answered without a HandOffReply");
  // A moved partition is handed off only once.
  auto again = CallServer(ctx, 0, HandOffRequest{name, p.part, 1, 2});
  if (again.ok() || again.status().message().find("was handed off to server 1 in placement 1") ==
                        std::string::npos)
    return Internal("a second hand-off of a partition gone was not refused: " +
                    again.status().message());
  PSTRAIN_RETURN_IF_ERROR(ctx.cluster->Barrier(BarrierGroup::kWorkers));  // B: the other goes on
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto taken =
      CallServer(ctx, 1, TakeOverRequest{name, p.part, 1, false, p.elements}, handed->payload);
  return taken.status();
}

struct Outcome {
  Status status;
  std::vector<std::vector<float>> weights;  // the chief's, at the end
  int64_t retried = 0;                      // the other worker's Moved retries
  int moved = 0;                            // partitions moved
};

Outcome Run(OptimizerType optimizer, Move move) {
  Outcome out;
  std::mutex mutex;
  out.status = RunJob(MoveConfig(optimizer), [&](WorkerContext& ctx) -> Status {
    std::vector<std::vector<float>> values(2);
    for (int t = 0; t < 2; ++t) {
      values[t].resize(kTensors[t].elements);
      for (size_t i = 0; i < values[t].size(); ++i)
        values[t][i] = 0.001f * static_cast<float>(i + 1) - 0.3f * static_cast<float>(t);
      if (ctx.rank == 0) PSTRAIN_RETURN_IF_ERROR(ctx.kv->Init(t, values[t].data()).Wait());
    }
    for (int t = 0; t < 2; ++t)
      PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(t, values[t].data(), 0).Wait());
    std::vector<std::vector<float>> grads = values;
    for (int64_t step = 0; step < kSteps; ++step) {
      if (move != Move::kNone && step == kMoveAt) {
        // Between steps: every pull of the step before is answered.
        PSTRAIN_RETURN_IF_ERROR(ctx.cluster->Barrier(BarrierGroup::kWorkers));  // A
        if (ctx.rank == 1) {
          Status refused = ctx.kv->MovePartition(0, 0, 1, 1).Wait();
          if (refused.ok() || refused.message().find("only the chief") == std::string::npos)
            return Internal("a move asked by worker 1 was not refused: " + refused.message());
        }
        int moves = 0;
        for (int t = 0; t < 2; ++t)
          for (const Partition& p : ctx.kv->map().partitions(t)) {
            if (p.server != 0) continue;
            ++moves;
            if (move == Move::kByHand) {
              // Once, for the first partition; the others are moved below.
              if (moves > 1) continue;
              if (ctx.rank == 0) PSTRAIN_RETURN_IF_ERROR(MoveByHand(ctx, t, p));
              if (ctx.rank == 1)
                PSTRAIN_RETURN_IF_ERROR(ctx.cluster->Barrier(BarrierGroup::kWorkers));  // B
            } else if (ctx.rank == 0) {
              PSTRAIN_RETURN_IF_ERROR(ctx.kv->MovePartition(t, p.part, 1, 1).Wait());
            }
            std::lock_guard<std::mutex> lock(mutex);
            if (ctx.rank == 0) ++out.moved;
          }
        if (move == Move::kClient)
          PSTRAIN_RETURN_IF_ERROR(ctx.cluster->Barrier(BarrierGroup::kWorkers));
      }
      for (int t = 0; t < 2; ++t) {
        for (size_t i = 0; i < grads[t].size(); ++i) grads[t][i] = Gradient(ctx.rank, step, i);
        KvHandle push = ctx.kv->Push(t, grads[t].data(), step);
        KvHandle pull = ctx.kv->Pull(t, values[t].data(), step + 1);
        PSTRAIN_RETURN_IF_ERROR(push.Wait());
        PSTRAIN_RETURN_IF_ERROR(pull.Wait());
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (ctx.rank == 0) out.weights = values;
    if (ctx.rank == 1) out.retried = ctx.kv->moved_retries();
    return Status::OK();
  });
  return out;
}

void CheckExactlyOnce(OptimizerType optimizer, Move move) {
  Outcome still = Run(optimizer, Move::kNone);
  REQUIRE_MESSAGE(still.status.ok(), still.status.message());
  Outcome moved = Run(optimizer, move);
  REQUIRE_MESSAGE(moved.status.ok(), moved.status.message());
  // "w" has 4 partitions over 2 servers, "b" one; by hand, the first only.
  CHECK(moved.moved >= (move == Move::kByHand ? 1 : 2));
  // The other worker's pushes and pulls of each moved partition went to
  // server 0 first and were sent again: refused there, applied once.
  CHECK(moved.retried >= moved.moved);
  REQUIRE(still.weights.size() == 2);
  REQUIRE(moved.weights.size() == 2);
  for (int t = 0; t < 2; ++t) {
    REQUIRE(moved.weights[t].size() == still.weights[t].size());
    for (size_t i = 0; i < still.weights[t].size(); ++i) {
      INFO("tensor ", t, " element ", i);
      REQUIRE(moved.weights[t][i] == still.weights[t][i]);
    }
  }
}

TEST_CASE("a partition moved between steps: every update applied once (sgd)") {
  CheckExactlyOnce(OptimizerType::kSgd, Move::kClient);
}

TEST_CASE("a partition moved between steps takes its optimizer state along (adam)") {
  CheckExactlyOnce(OptimizerType::kAdam, Move::kClient);
}

TEST_CASE("requests that reach the new server before the state wait for it, applied once") {
  CheckExactlyOnce(OptimizerType::kAdam, Move::kByHand);
}

TEST_CASE("async: a partition moved while the other worker pushes loses and repeats nothing") {
  constexpr int kPushes = 200;
  Config config = MoveConfig(OptimizerType::kSgd);
  config.train.mode = UpdateMode::kAsync;
  config.train.optimizer.lr = 1.0f;
  std::vector<float> after(kTensors[0].elements);
  std::atomic<int64_t> retried{0};
  Status st = RunJob(config, [&](WorkerContext& ctx) -> Status {
    std::vector<float> zeros(kTensors[0].elements, 0.0f);
    if (ctx.rank == 0) PSTRAIN_RETURN_IF_ERROR(ctx.kv->Init(0, zeros.data()).Wait());
    PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(0, after.data(), 0).Wait());
    // Whole numbers: every sum is exact, in any order.
    std::vector<float> grad(kTensors[0].elements, static_cast<float>(ctx.rank + 1));
    std::vector<KvHandle> moves;
    for (int k = 0; k < kPushes; ++k) {
      if (k == kPushes / 2) {
        PSTRAIN_RETURN_IF_ERROR(ctx.cluster->Barrier(BarrierGroup::kWorkers));
        if (ctx.rank == 0)  // while both go on pushing
          for (const Partition& p : ctx.kv->map().partitions(0))
            if (p.server == 0) moves.push_back(ctx.kv->MovePartition(0, p.part, 1, 1));
      }
      PSTRAIN_RETURN_IF_ERROR(ctx.kv->Push(0, grad.data(), k).Wait());
    }
    for (const KvHandle& m : moves) PSTRAIN_RETURN_IF_ERROR(m.Wait());
    retried += ctx.kv->moved_retries();
    PSTRAIN_RETURN_IF_ERROR(ctx.cluster->Barrier(BarrierGroup::kWorkers));
    if (ctx.rank == 0) return ctx.kv->Pull(0, after.data(), 0).Wait();
    return Status::OK();
  });
  REQUIRE_MESSAGE(st.ok(), st.message());
  INFO("requests sent again after a Moved: ", retried.load());
  // lr 1: w = 0 - every push once = -(200 * 1 + 200 * 2).
  for (size_t i = 0; i < after.size(); ++i) REQUIRE(after[i] == -3.0f * kPushes);
}

TEST_CASE("a partition's state travels checked whole") {
  UpdateCore::State core{7, {4, 3}, {true, true}, 0, 0, {{9, {true, false}}}};
  MovedPartition p{{"w", 2, 7, 7, 7, {1.5f, -2.0f, 3.25f}, {{"m", {0.1f, 0.2f, 0.3f}}}}, core};
  std::vector<uint8_t> bytes = EncodePartitionState(p);
  auto back = DecodePartitionState(bytes.data(), bytes.size(), "w", 2, 3);
  REQUIRE_MESSAGE(back.ok(), back.status().message());
  CHECK(back->partition.values == p.partition.values);
  CHECK(back->partition.slots == p.partition.slots);
  CHECK(back->partition.applied == 7);
  CHECK(back->partition.optimizer_steps == 7);
  CHECK(back->core.pushes == core.pushes);
  CHECK(back->core.members == core.members);
  REQUIRE(back->core.changes.size() == 1);
  CHECK(back->core.changes[0].first == 9);
  // Every cut, a byte too many, and more values than a partition holds.
  for (size_t n = 0; n < bytes.size(); ++n)
    CHECK_FALSE(DecodePartitionState(bytes.data(), n, "w", 2, 3).ok());
  bytes.push_back(0);
  auto longer = DecodePartitionState(bytes.data(), bytes.size(), "w", 2, 3);
  REQUIRE_FALSE(longer.ok());
  CHECK(longer.status().message().find("after its end") != std::string::npos);
  bytes.pop_back();
  auto big = DecodePartitionState(bytes.data(), bytes.size(), "w", 2, 2);
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().message().find("3 values, expected 1 to 2") != std::string::npos);
  // A state with no member cannot be taken.
  p.core.members = {false, false};
  bytes = EncodePartitionState(p);
  auto none = DecodePartitionState(bytes.data(), bytes.size(), "w", 2, 3);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("no member") != std::string::npos);
}

}  // namespace
}  // namespace pstrain
