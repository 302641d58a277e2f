// bench train: training throughput of a config.
//   local: one process, one thread, no servers: forward, backward and the
//          configured optimizer applied in place (the compute path alone;
//          with model.device: gpu, forward and backward on the GPU, the
//          weights uploaded and the gradients copied back every step).
//   ps:    a local job of S servers and W workers (threads of this process),
//          every step pushing gradients and pulling weights: samples/s of the
//          job and the share of step time spent communicating.
#include <chrono>
#include <cstdio>
#include <mutex>

#include "optim/dense_optimizer.h"
#include "roles/local_job.h"
#include "roles/worker/trainer.h"
#include "src/app/bench/json.h"
#include "src/data/batcher.h"
#include "src/data/dataset.h"
#include "src/gpu/gpu.h"
#include "src/nn/model.h"

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;

Status BenchLocal(const Config& config, int64_t steps) {
  auto model = Model::Build(config.model, config.train.seed);
  if (!model.ok()) return model.status();
  auto data = LoadTrainShard(config.data, 0, 1);
  if (!data.ok()) return data.status();
  std::vector<std::unique_ptr<DenseOptimizer>> optimizers;
  for (Param* p : (*model)->params()) {
    auto opt = MakeDenseOptimizer(OptimizerFor(config, p->name), p->value.data.size());
    if (!opt.ok()) return opt.status();
    optimizers.push_back(std::move(*opt));
  }
  std::unique_ptr<GpuModel> gpu;
  if (config.model.device == Device::kGpu) {
    auto built = GpuModel::Build(config.model, (*model)->params(), config.train.seed);
    if (!built.ok()) return built.status();
    gpu = std::move(*built);
  }
  const int batch_size = config.train.batch_size;
  Batcher batcher(&*data, batch_size, 0, 1, true, config.train.seed, config.data.shuffle);
  Batch batch;
  int epoch = 0;
  batcher.StartEpoch(epoch);
  const int64_t warmup = 20;
  Clock::time_point start;
  double copied = 0;  // the GPU's copy seconds at the start of the timed steps
  for (int64_t step = 0; step < warmup + steps; ++step) {
    if (step == warmup) {
      start = Clock::now();
      if (gpu) copied = gpu->CopySeconds();
    }
    if (!batcher.Next(&batch)) {
      batcher.StartEpoch(++epoch);
      batcher.Next(&batch);
    }
    if (gpu) {
      PSTRAIN_RETURN_IF_ERROR(gpu->UploadWeights());
      PSTRAIN_RETURN_IF_ERROR(gpu->Forward(batch, true).status());
      PSTRAIN_RETURN_IF_ERROR(gpu->Backward(batch).status());
    } else {
      (*model)->Forward(batch, true);
      PSTRAIN_RETURN_IF_ERROR((*model)->Backward(batch).status());
    }
    const auto& params = (*model)->params();
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i]->trainable)  // a layer's statistic moves in Forward alone
        optimizers[i]->Update(params[i]->value.ptr(), params[i]->grad.ptr());
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  PrintJsonLine({{"bench", "train"},
                 {"mode", "local"},
                 {"config", config.source},
                 {"device", gpu ? "gpu" : "cpu"},
                 {"threads", 1},
                 {"batch", batch_size},
                 {"steps", steps},
                 {"samples_per_s", Rounded(static_cast<double>(steps * batch_size) / seconds, 1)},
                 {"copy_share", Rounded(gpu ? (gpu->CopySeconds() - copied) / seconds : 0.0, 3)}});
  return Status::OK();
}

Status BenchPs(Config config, int64_t steps, int servers, int workers) {
  config.train.steps = steps;
  config.train.checkpoint.reset();
  config.data.test.clear();  // throughput only: no evaluation
  std::mutex mutex;
  std::vector<TrainStats> stats;
  // Collects each worker's stats when its job object goes away.
  class Reporting : public WorkerJob {
   public:
    Reporting(std::unique_ptr<TrainJob> job, std::vector<TrainStats>* out, std::mutex* mutex)
        : job_(std::move(job)), out_(out), mutex_(mutex) {}
    std::vector<TensorSpec> PsTensors() override { return job_->PsTensors(); }
    // Without it a config with ps: false weights gets no ring and fails.
    bool NeedsCollective() override { return job_->NeedsCollective(); }
    Status Run(WorkerContext& ctx) override {
      Status st = job_->Run(ctx);
      std::lock_guard<std::mutex> lock(*mutex_);
      out_->push_back(job_->stats());
      return st;
    }

   private:
    std::unique_ptr<TrainJob> job_;
    std::vector<TrainStats>* out_;
    std::mutex* mutex_;
  };
  LocalJobOptions job;
  job.cluster.server_num = servers;
  job.cluster.worker_num = workers;
  job.config = config;
  job.make_job = [&](int) -> std::unique_ptr<WorkerJob> {
    return std::make_unique<Reporting>(std::move(TrainJob::Create(config).value()), &stats, &mutex);
  };
  job.make_logger = [](const std::string& name) {
    Logger log = MakeLogger(name);
    log->set_level(spdlog::level::warn);
    return log;
  };
  PSTRAIN_RETURN_IF_ERROR(RunLocalJob(job));
  double samples_per_s = 0, compute = 0, comm = 0, copy = 0;
  for (const TrainStats& s : stats) {
    samples_per_s += static_cast<double>(s.samples) / s.seconds;
    compute += s.compute_s;
    comm += s.comm_s;
    copy += s.copy_s;
  }
  // comm_share: push and pull (waiting for them); copy_share: the GPU's
  // host <-> device copies, a part of compute.
  PrintJsonLine({{"bench", "train"},
                 {"mode", "ps"},
                 {"config", config.source},
                 {"device", DeviceName(config.model.device)},
                 {"servers", servers},
                 {"workers", workers},
                 {"batch", config.train.batch_size},
                 {"steps", steps},
                 {"samples_per_s", Rounded(samples_per_s, 1)},
                 {"comm_share", Rounded(comm / (compute + comm), 3)},
                 {"copy_share", Rounded(copy / (compute + comm), 3)}});
  return Status::OK();
}

}  // namespace

Status RunTrainBench(const std::string& config_path, int64_t steps, const std::vector<int>& servers,
                     const std::vector<int>& workers) {
  auto config = LoadConfig(config_path);
  if (!config.ok()) return config.status();
  if (auto check = TrainJob::Create(*config); !check.ok()) return check.status();
  PSTRAIN_RETURN_IF_ERROR(BenchLocal(*config, steps));
  for (int s : servers)
    for (int w : workers) PSTRAIN_RETURN_IF_ERROR(BenchPs(*config, steps, s, w));
  return Status::OK();
}

}  // namespace pstrain
