// bench kv: push+pull round trips of one PS tensor on loopback, with the
// servers applying a real SGD update (sync mode), for each tensor size,
// server count and worker count; with TLS or a cluster token when asked, and
// then, with --compare, alternated with plaintext runs.
#include "src/app/bench/kv.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <vector>

#include "roles/local_job.h"
#include "src/app/bench/bench.h"
#include "src/app/bench/json.h"
#include "src/common/tensor.h"

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;

struct KvCase {
  int64_t bytes;
  int servers;
  int workers;
};

// Each worker: the chief initializes, everyone pulls, then `iters` steps of
// push(gradient) + pull(updated values), issued together so the pull waits
// on the server for the step's update rather than paying a second trip.
class KvBenchJob : public WorkerJob {
 public:
  KvBenchJob(int64_t elements, int warmup, int iters, std::vector<double>* seconds,
             std::mutex* mutex)
      : elements_(elements), warmup_(warmup), iters_(iters), seconds_(seconds), mutex_(mutex) {}

  std::vector<TensorSpec> PsTensors() override { return {{"w", elements_}}; }

  Status Run(WorkerContext& ctx) override {
    // Tensor memory, as a model's weights and gradients.
    FloatBuffer values(elements_, 0.5f), grad(elements_, 1e-3f);
    if (ctx.rank == 0) PSTRAIN_RETURN_IF_ERROR(ctx.kv->Init(0, values.data()).Wait());
    PSTRAIN_RETURN_IF_ERROR(ctx.kv->Pull(0, values.data(), 0).Wait());
    std::vector<double> times;
    times.reserve(iters_);
    for (int step = 0; step < warmup_ + iters_; ++step) {
      Clock::time_point start = Clock::now();
      PSTRAIN_RETURN_IF_ERROR(
          ctx.kv->PushPull(0, grad.data(), step, values.data(), step + 1).Wait());
      if (step >= warmup_)
        times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    std::lock_guard<std::mutex> lock(*mutex_);
    seconds_->insert(seconds_->end(), times.begin(), times.end());
    return Status::OK();
  }

 private:
  const int64_t elements_;
  const int warmup_, iters_;
  std::vector<double>* seconds_;
  std::mutex* mutex_;
};

double Median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

// About 4 GiB moved per case, within [30, 5000] round trips.
int ItersFor(int64_t bytes) {
  return static_cast<int>(std::clamp<int64_t>((int64_t{1} << 32) / (2 * bytes), 30, 5000));
}

// One case's run: its median goodput (GB/s per worker).
StatusOr<double> RunKvCase(const KvCase& c, const KvSecurity& security) {
  const int iters = ItersFor(c.bytes), warmup = std::max(3, iters / 20);
  std::vector<double> seconds;
  std::mutex mutex;
  LocalJobOptions job;
  job.cluster.server_num = c.servers;
  job.cluster.worker_num = c.workers;
  job.cluster.tls = security.tls;
  job.cluster.token = security.token;
  job.config.train.mode = UpdateMode::kSync;
  job.config.train.optimizer.type = OptimizerType::kSgd;
  job.config.train.optimizer.lr = 1e-3f;
  job.make_job = [&](int) {
    return std::make_unique<KvBenchJob>(c.bytes / 4, warmup, iters, &seconds, &mutex);
  };
  job.make_logger = [](const std::string& name) {
    Logger log = MakeLogger(name);
    log->set_level(spdlog::level::warn);
    return log;
  };
  PSTRAIN_RETURN_IF_ERROR(RunLocalJob(job));
  // The median round trip of every worker's timed steps: robust to the
  // scheduling hiccups of a shared machine. The mean is printed beside it.
  double mean_s = 0;
  for (double s : seconds) mean_s += s / static_cast<double>(seconds.size());
  double median_s = Median(seconds);
  double gbps = 2.0 * static_cast<double>(c.bytes) / median_s / 1e9;
  PrintJsonLine({{"bench", "kv"},
                 {"bytes", c.bytes},
                 {"servers", c.servers},
                 {"workers", c.workers},
                 {"mode", "sync"},
                 {"optimizer", "sgd"},
                 {"security", security.name()},
                 {"iters", iters},
                 {"pushpull_ms", Rounded(median_s * 1e3, 4)},
                 {"mean_ms", Rounded(mean_s * 1e3, 4)},
                 {"GBps", Rounded(gbps, 3)},
                 {"aggregate_GBps", Rounded(gbps * c.workers, 3)}});
  return gbps;
}

// `rounds` runs of the case plain and `rounds` with `security`, alternated
// so that the machine's drift (other jobs, clock) hits both alike; the
// medians and their ratio on one line.
Status CompareKvCase(const KvCase& c, const KvSecurity& security, int rounds) {
  std::vector<double> plain, secured;
  for (int round = 0; round < rounds; ++round) {
    auto a = RunKvCase(c, KvSecurity{});
    if (!a.ok()) return a.status();
    plain.push_back(*a);
    auto b = RunKvCase(c, security);
    if (!b.ok()) return b.status();
    secured.push_back(*b);
  }
  const double p = Median(plain), s = Median(secured);
  PrintJsonLine({{"bench", "kv_compare"},
                 {"bytes", c.bytes},
                 {"servers", c.servers},
                 {"workers", c.workers},
                 {"security", security.name()},
                 {"rounds", rounds},
                 {"plain_GBps", Rounded(p, 3)},
                 {"secured_GBps", Rounded(s, 3)},
                 {"ratio", Rounded(s / p, 3)}});
  return Status::OK();
}

}  // namespace

std::string KvSecurity::name() const {
  if (tls.enabled() && !token.empty()) return "tls+token";
  if (tls.enabled()) return "tls";
  return token.empty() ? "plain" : "token";
}

Status RunKvBench(const std::vector<int64_t>& sizes, const std::vector<int>& servers,
                  const std::vector<int>& workers, const KvSecurity& security, int rounds) {
  for (int64_t bytes : sizes)
    for (int s : servers)
      for (int w : workers) {
        const KvCase c{bytes, s, w};
        if (rounds > 0) {
          PSTRAIN_RETURN_IF_ERROR(CompareKvCase(c, security, rounds));
        } else {
          PSTRAIN_RETURN_IF_ERROR(RunKvCase(c, security).status());
        }
      }
  return Status::OK();
}

}  // namespace pstrain
