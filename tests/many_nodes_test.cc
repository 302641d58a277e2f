// A job wider than the anti-stranger limits' defaults starts and trains with
// default settings: 16 servers and 128 workers as threads of this process
// (roles/local_job.h), every worker dialing every server at the same moment.
// The handshake cap (PSTRAIN_MAX_HANDSHAKING, 64 by default) bounds
// strangers only: a node counts the job's own nodes on top of it
// (comm/transport/security.h), and a worker whose connect is refused for load
// tries again (comm/transport/patient_connect.h). Each worker pushes two
// steps of a tensor split over all 16 servers; the weights every worker
// pulls at the end are the hand-computed averaged SGD steps.
#include <doctest/doctest.h>

#include <memory>
#include <mutex>
#include <vector>

#include "comm/ps/kv_client.h"
#include "roles/local_job.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

constexpr int kServers = 16, kWorkers = 128, kSteps = 2;
constexpr int64_t kElements = 4096;  // 16 KiB: 16 partitions of 1 KiB, one per server
constexpr float kLr = 0.5f;

float Gradient(int rank, int64_t step, int64_t i) {
  return 0.001f * static_cast<float>((rank % 5 + 1) * (step + 1)) * static_cast<float>(i % 3 + 1);
}

class Steps : public WorkerJob {
 public:
  explicit Steps(std::vector<float>* final_values) : final_(final_values) {}
  std::vector<TensorSpec> PsTensors() override { return {{"w", kElements}}; }
  Status Run(WorkerContext& ctx) override {
    std::vector<float> values(kElements, 1.0f), grad(kElements);
    if (ctx.rank == 0) PSTRAIN_RETURN_IF_ERROR(ctx.kv->Init(0, values.data()).Wait());
    PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(0, values.data(), 0).Wait());
    for (int64_t step = 0; step < kSteps; ++step) {
      for (int64_t i = 0; i < kElements; ++i) grad[i] = Gradient(ctx.rank, step, i);
      KvHandle push = ctx.kv->Push(0, grad.data(), step);
      KvHandle pull = ctx.kv->Pull(0, values.data(), step + 1);
      PSTRAIN_RETURN_IF_ERROR(push.Wait());
      PSTRAIN_RETURN_IF_ERROR(pull.Wait());
    }
    *final_ = values;
    return Status::OK();
  }

 private:
  std::vector<float>* final_;
};

TEST_CASE("16 servers and 128 workers start and train with default settings") {
  auto sink = std::make_shared<testing::CaptureSink>();
  std::vector<std::vector<float>> finals(kWorkers);
  LocalJobOptions job;  // ClusterOptions' defaults, PSTRAIN_MAX_HANDSHAKING 64 among them
  job.cluster.server_num = kServers;
  job.cluster.worker_num = kWorkers;
  job.config.train.mode = UpdateMode::kSync;
  job.config.train.optimizer.type = OptimizerType::kSgd;
  job.config.train.optimizer.lr = kLr;
  job.config.train.partition_bytes = 1024;
  job.make_job = [&finals](int index) { return std::make_unique<Steps>(&finals[index]); };
  job.make_logger = [sink](const std::string& name) { return testing::CaptureLogger(name, sink); };
  Status st = RunLocalJob(job);
  REQUIRE_MESSAGE(st.ok(), st.message());
  // Sync SGD on the workers' mean gradient, step by step.
  std::vector<float> expected(kElements, 1.0f);
  for (int64_t step = 0; step < kSteps; ++step)
    for (int64_t i = 0; i < kElements; ++i) {
      double sum = 0;
      for (int r = 0; r < kWorkers; ++r) sum += Gradient(r, step, i);
      expected[i] -= kLr * static_cast<float>(sum / kWorkers);
    }
  for (int r = 0; r < kWorkers; ++r) {
    REQUIRE(finals[r].size() == static_cast<size_t>(kElements));
    for (int64_t i = 0; i < kElements; i += 97)
      REQUIRE(finals[r][i] == doctest::Approx(expected[i]).epsilon(1e-5));
  }
}

}  // namespace
}  // namespace pstrain
