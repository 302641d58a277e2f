#include "tests/train_util.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>

#include "roles/local_job.h"
#include "src/data/criteo_gen.h"

namespace pstrain::testing {
namespace {

// Runs a TrainJob and, on the chief, records its stats and weights.
class Recording : public WorkerJob {
 public:
  Recording(std::unique_ptr<TrainJob> job, TrainOutcome* out, std::mutex* mutex,
            std::function<void(int)> before_run)
      : job_(std::move(job)), out_(out), mutex_(mutex), before_run_(std::move(before_run)) {}
  std::vector<TensorSpec> PsTensors() override { return job_->PsTensors(); }
  bool NeedsCollective() override { return job_->NeedsCollective(); }
  Status Run(WorkerContext& ctx) override {
    if (before_run_) before_run_(ctx.rank);
    Status st = job_->Run(ctx);
    if (ctx.rank == 0) {
      std::lock_guard<std::mutex> lock(*mutex_);
      out_->stats = job_->stats();
      out_->weights = job_->Weights();
    }
    return st;
  }

 private:
  std::unique_ptr<TrainJob> job_;
  TrainOutcome* out_;
  std::mutex* mutex_;
  std::function<void(int)> before_run_;
};

}  // namespace

std::string RepoPath(const std::string& relative) {
  std::string here = __FILE__;
  return here.substr(0, here.rfind("tests/")) + relative;
}

LocalJobOptions QuietJob(const Config& config, int servers, int workers,
                         const std::shared_ptr<CaptureSink>& sink) {
  LocalJobOptions job;
  job.cluster.server_num = servers;
  job.cluster.worker_num = workers;
  job.config = config;
  job.make_logger = [sink](const std::string& name) { return CaptureLogger(name, sink); };
  return job;
}

TrainOutcome TrainLocally(const Config& config, int servers, int workers,
                          const std::string& ring_transport,
                          std::function<void(int rank)> before_run) {
  TrainOutcome out;
  std::mutex mutex;
  LocalJobOptions job;
  job.cluster.server_num = servers;
  job.cluster.worker_num = workers;
  job.cluster.ring_transport = ring_transport;
  job.config = config;
  job.make_job = [&](int) -> std::unique_ptr<WorkerJob> {
    auto train = TrainJob::Create(config);
    REQUIRE_MESSAGE(train.ok(), train.status().message());
    return std::make_unique<Recording>(std::move(*train), &out, &mutex, before_run);
  };
  auto sink = out.sink;
  job.make_logger = [sink](const std::string& name) { return CaptureLogger(name, sink); };
  out.status = RunLocalJob(job);
  return out;
}

ResumedRun TrainInTwoJobs(const Config& config, int servers, int workers, int64_t stop_at,
                          int64_t every, const std::string& checkpoint_dir) {
  Config first = config;
  first.train.steps = stop_at;
  first.train.checkpoint = CheckpointConfig{};
  first.train.checkpoint->dir = checkpoint_dir;
  first.train.checkpoint->every_steps = every;
  ResumedRun run;
  run.first = TrainLocally(first, servers, workers);
  if (!run.first.status.ok()) return run;
  Config second = first;
  second.train.steps = config.train.steps;
  second.train.checkpoint->resume = true;
  run.resumed = TrainLocally(second, servers, workers);
  return run;
}

ClickData::ClickData(int64_t rows, int64_t test_rows) {
  char name[] = "/tmp/pstrain-clicks-XXXXXX";
  REQUIRE(mkdtemp(name) != nullptr);
  dir = name;
  GenOptions gen;
  gen.rows = rows;
  gen.shards = 2;
  gen.test_rows = test_rows;
  gen.out_dir = dir;
  gen.min_categories = 1000;
  gen.max_categories = 5000;
  auto report = GenerateCriteo(gen);
  REQUIRE_MESSAGE(report.ok(), report.status().message());
}

ClickData::~ClickData() { std::filesystem::remove_all(dir); }

Config ClickLrConfig(const ClickData& data, int64_t steps) {
  auto config = LoadConfig(RepoPath("configs/lr_criteo.yaml"));
  REQUIRE_MESSAGE(config.ok(), config.status().message());
  config->data.train = {data.dir + "/train.txt"};
  config->data.test = {data.dir + "/test.txt"};
  config->data.vocab = 65536;
  config->model.wide[0].vocab = 65536;
  config->train.batch_size = 128;
  config->train.steps = steps;
  return *config;
}

double LargestDifference(const TrainOutcome& a, const TrainOutcome& b, size_t first) {
  REQUIRE(a.weights.size() == b.weights.size());
  double worst = 0;
  for (size_t t = first; t < a.weights.size(); ++t) {
    REQUIRE(a.weights[t].size() == b.weights[t].size());
    for (size_t i = 0; i < a.weights[t].size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(a.weights[t][i] - b.weights[t][i])));
  }
  return worst;
}

}  // namespace pstrain::testing
