// TrainJob: a worker's training loop, as a WorkerJob.
//
// Every worker builds the same model from the config (same seed, same
// initial weights). The chief pushes those weights to the servers once; every
// worker pulls them. Then, each step:
//   1. the next batch of this worker's shard (src/data: the same shuffled
//      order on every worker, worker r taking its slice),
//   2. forward and backward,
//   3. push every PS gradient and pull every PS weight in one batch of
//      requests; the pull asks for the step's update (sync), any values
//      (async) or values at most `staleness` steps old (ssp). While those are
//      in flight, the gradients of the ps: false weights are averaged among
//      the workers (densely, or threshold-encoded and all-gathered) and
//      applied here; in mode average each worker applies its own, and the
//      weights are averaged when AverageDue() (roles/worker/allreduced_weights.h),
//   Server-held embedding tables (init_in_server) work on the batch's rows
//   only: pulled before step 2, pushed after it (roles/worker/remote_embeddings.h).
//   4. every log_every steps: "epoch: E step: S, loss is L".
// At each epoch end the chief evaluates on the test set (accuracy, or AUC and
// log-loss for click data) and logs throughput; checkpoints as configured.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "optim/threshold_codec.h"
#include "roles/worker/allreduced_weights.h"
#include "roles/worker/best_epoch.h"
#include "roles/worker/data_fit.h"
#include "roles/worker/job.h"
#include "src/common/config/config.h"
#include "src/data/metrics.h"

namespace pstrain {

// Named here only; trainer*.cc include them.
struct Batch;
struct DataRun;
struct Dataset;
struct EpochPlan;
struct Param;
struct TrainCounters;
struct WorkerPlace;
class CheckpointInFlight;
class GpuModel;
class Model;
class NcclCommunicator;
class NormClip;
class TrainReport;
class PsAveraging;
class PsCompression;
class RemoteEmbeddings;
class SparseClient;

struct TrainStats {
  int64_t steps = 0;       // steps this worker ran
  int64_t samples = 0;     // samples this worker trained on
  double seconds = 0;      // wall time of the training loop
  double compute_s = 0;    // forward + backward
  double comm_s = 0;       // waiting on push/pull: push_s + pull_s + allreduce_s
  double push_s = 0;       // sending the dense requests, embedding rows' scatter
  double pull_s = 0;       // embedding rows' gather, the dense push+pull round trip
  double allreduce_s = 0;  // averaging the ps: false weights among workers
  double copy_s = 0;       // device: gpu: host <-> device copies (part of compute_s)
  int64_t copy_bytes = 0;  // device: gpu: what those copies moved
  double last_loss = 0;
  double test_metric = -1;        // accuracy, AUC or RMSE after the last epoch (chief; -1: not run)
  double test_logloss = -1;       // click data only
  double validation_metric = -1;  // the same on data.validation (chief; -1: not run)
  // train.clip_norm: the last step's global gradient norm (before the
  // clip), and the steps whose gradient was scaled down.
  double grad_norm = -1;
  int64_t clipped_steps = 0;
  // PS pushes: bytes sent, the same pushes dense, and the
  // threshold encoders' totals (min_tau..max_tau: their final thresholds).
  int64_t push_bytes = 0, push_dense_bytes = 0;
  CompressionCounters compression;
};

class TrainJob : public WorkerJob {
 public:
  // Test samples per evaluation batch (roles/worker/trainer_eval.cc).
  static constexpr int kEvalBatch = 1024;

  // Builds the model and checks that the config can be trained (placement
  // of every parameter, data format against the model's input).
  static StatusOr<std::unique_ptr<TrainJob>> Create(const Config& config);
  ~TrainJob() override;

  // Reads the first batch of every data file and checks it against the
  // model (roles/worker/data_fit.h): before the job starts, so that data that does
  // not fit is one line naming the config key and the file, exit 2.
  Status CheckData() const;
  const ModelReads& reads() const { return reads_; }
  const Model& model() const { return *model_; }

  std::vector<TensorSpec> PsTensors() override;
  bool NeedsCollective() override;
  Status Run(WorkerContext& context) override;

  const TrainStats& stats() const { return stats_; }
  // The weights as this worker last pulled them, in params() order (a
  // server-held table: the rows of the last batch's ids).
  std::vector<std::vector<float>> Weights() const;

 private:
  explicit TrainJob(const Config& config);
  Status InitWeights(WorkerContext& ctx, const CheckpointRef& resume, int64_t step);
  // This worker's batcher for its shard of `data` (its rank and the worker
  // count in ctx) and the plan of a fresh run from `step`
  // (roles/worker/trainer_workers.cc).
  StatusOr<DataRun> MakeDataRun(WorkerContext& ctx, const std::shared_ptr<const Dataset>& data,
                                int64_t step);
  // `run` continues from `from` (a checkpoint's place, or, `live`, the
  // chief's at a live change of workers): the rest of its epoch split among
  // this run's workers.
  Status ContinueFrom(WorkerContext& ctx, const Dataset& data, const WorkerPlace& from, bool live,
                      DataRun* run);
  // A live change of workers at `step` (roles/worker/trainer_workers.cc):
  // false when this worker leaves; else it goes on with its new rank, the
  // new ring and `run` planned anew.
  StatusOr<bool> ChangeWorkers(WorkerContext& ctx, int64_t step,
                               const ClusterClient::WorkersChange& change,
                               const std::shared_ptr<const Dataset>& data, DataRun* run);
  // `next`: the batch after this one, when its rows may be prefetched.
  Status Step(WorkerContext& ctx, Batch& batch, int64_t step, const Batch* next);
  Status ExchangeLocalState(WorkerContext& ctx, int64_t step);
  // `rows_min_clock`: the clock the server-held tables' rows must have
  // reached (sync: the step after the last one trained, so that the test
  // sees its updates, as the dense pull before it does).
  bool HasHeldOutData() const { return !config_.data.test.empty() || HasValidation(config_.data); }
  // After epoch `epoch` (1-based) ends at 0-based `step`: the chief
  // evaluates, the metrics file's line, and every worker records the
  // chief's validation metric (best_); true: train.early_stopping ends the
  // job here.
  StatusOr<bool> EndEpoch(WorkerContext& ctx, TrainReport& report, int epoch, int64_t step,
                          bool last, double rate);
  // The validation set (if any), then the test set (if any). `steps_done`
  // >= 0: an epoch's end, whose validation metric best_ records.
  Status Evaluate(WorkerContext& ctx, int epoch, int64_t rows_min_clock = 0,
                  int64_t steps_done = -1);
  // A data set read whole, for evaluation; `which` is "test" or "validation".
  struct HeldOut {
    const char* which;
    std::shared_ptr<const Dataset> data;  // read at its first evaluation
  };
  StatusOr<TestMetric> Measure(WorkerContext& ctx, HeldOut* set, int64_t rows_min_clock);
  // At the end: bytes pushed and pulled, samples/s, the GPU's copies.
  void LogTotals(WorkerContext& ctx);
  // device: gpu: the model on the GPU and, with ps: false weights and
  // several workers, NCCL among them (worker 0's id shared via the
  // scheduler).
  Status StartGpu(WorkerContext& ctx);
  // Forward and backward of one training batch, on the GPU or here.
  StatusOr<float> ComputeGradients(const Batch& batch);
  StatusOr<const Tensor*> Logits(const Batch& batch);
  int64_t MinClock(int64_t step) const;
  // Step 3's requests for the PS weights (roles/worker/ps_compression.h: threshold-
  // encoded gradients; roles/worker/ps_averaging.h: mode average's local step, and
  // its weight deltas when a round ends).
  // With train.clip_norm: the pushes and the norm requests, no pulls.
  std::vector<KvOp> PsRequests(WorkerContext& ctx, int64_t step);
  // Step `step`'s pulls of every PS weight.
  void AddPulls(int64_t step, std::vector<KvOp>* ops);
  // train.clip_norm, once the pushes and the norm requests answered: the
  // step's factor, applied to the all-reduced gradients and sent to the
  // servers with the pulls (roles/worker/norm_clip.h).
  Status Clip(WorkerContext& ctx, int64_t step);
  // After step 3 completed: mode average anchors on the weights it pulled.
  void AfterPsRequests(int64_t step);
  // Whether a checkpoint of `steps_done` holds the job's state: in mode
  // average only at the end of a round (between rounds the servers hold
  // the last round's weights, the workers their own).
  bool CheckpointableAt(int64_t steps_done) const;
  // Mode average: whether the ps: false copies are averaged once
  // `steps_done` steps are done.
  bool AverageDue(int64_t steps_done) const;
  // This worker's counters so far, for its metrics (roles/worker/train_report.h).
  TrainCounters Counters(const WorkerContext& ctx) const;
  // The lr of train.optimizer at global step `step` (0-based).
  double LrAt(int64_t step, int workers) const;
  // Every worker, once `steps_done` steps are done and a checkpoint is due:
  // its own PS state (roles/worker/ps_state.h), then the chief begins the
  // checkpoint and, when `wait`, completes it.
  Status Checkpoint(WorkerContext& ctx, int64_t steps_done, const EpochPlan& plan, bool wait);
  // On resume, this worker's PS state from its file in `resume`, written by
  // `checkpoint_workers` workers.
  Status RestorePsWorkerState(WorkerContext& ctx, const CheckpointRef& resume,
                              int checkpoint_workers);
  // Completes the checkpoint in flight, if any (waits for its servers).
  Status FinishCheckpoint();
  // Whether a checkpoint is written after step `step` (0-based) of the
  // epoch under way: train.checkpoint's steps, and with keep_best the
  // epoch's end.
  bool CheckpointAt(int64_t step) const;
  // A worker of a sync elastic job lost mid-step (roles/worker/trainer_lost.cc).
  // The rank that writes checkpoints and evaluates: 0, or the lowest left.
  int ChiefRank(WorkerContext& ctx) const;
  // The ring failed at `step`: OK when the step finishes without it.
  Status AfterRingLost(WorkerContext& ctx, int64_t step, const Status& ring);
  // Step `step` failed: whether it was called off (the job goes on without
  // a lost worker from there, and trains it again).
  bool CalledOff(WorkerContext& ctx, int64_t step);
  // A change that drops lost workers: their batches of the last step they
  // pushed (which the job counts as used), to the sample log.
  void LogLostBatches(WorkerContext& ctx, const Dataset& data, const DataRun& run,
                      TrainReport& report) const;
  // This worker's place once `step` steps are done (roles/checkpoint/worker_place.h),
  // its epochs as `plan` lays them out.
  WorkerPlace PlaceAt(const WorkerContext& ctx, int64_t step, const EpochPlan& plan) const;
  // PlaceAt, with the batches lost workers had but never pushed up to
  // `step` put back to train first (a lost async or ssp worker, dropped at
  // the change ahead: roles/scheduler/lost_worker.cc).
  StatusOr<WorkerPlace> PlaceWithLostBatches(WorkerContext& ctx, int64_t step,
                                             const EpochPlan& plan) const;

  Config config_;
  // Whether the servers may call a step off (a lost worker of a sync
  // elastic job, roles/worker/trainer_lost.cc), to be trained again: its
  // all-reduced update then waits for their answer.
  const bool steps_can_be_called_off_;
  std::unique_ptr<NormClip> clip_;  // train.clip_norm only
  // The all-reduced update waits for the servers' answer: a step can be
  // called off, or the factor of a clipped one comes from their norms.
  const bool reduced_applied_late_;
  // config_.model as the model was built: server-held tables hold one
  // batch's rows (roles/placement/placed_model.h).
  ModelConfig model_config_;
  std::unique_ptr<Model> model_;
  ModelReads reads_;               // what the model reads of a sample, checked on each one loaded
  std::vector<Param*> ps_params_;  // on the servers, in PsTensors() order
  // Per ps_params_ entry: its pulls are compressed (roles/worker/compressed_pulls.h).
  std::vector<bool> delta_pulls_;
  std::unique_ptr<AllReducedWeights> allreduced_;  // the ps: false ones
  std::unique_ptr<PsCompression> ps_compression_;  // made in Run (needs the partition map)
  std::unique_ptr<PsAveraging> ps_averaging_;      // mode average only
  int64_t total_steps_ = 0;                        // of the job, set in Run
  int64_t epoch_end_step_ = -1;  // the step under way when it ends an epoch, else -1
  int64_t train_samples_ = 0;    // the training set's, set in Run
  std::unique_ptr<RemoteEmbeddings> embeddings_;  // server-held tables
  std::unique_ptr<SparseClient> sparse_;          // their rows, when there are some
  std::unique_ptr<GpuModel> gpu_;                 // device: gpu only
  std::unique_ptr<NcclCommunicator> nccl_;        // averages ps: false grads on the GPU
  HeldOut test_{"test", nullptr}, validation_{"validation", nullptr};
  BestEpoch best_;                // the validation metric's best epoch, the same on every worker
  double watched_ = 0;            // the chief's: its last measure of best_.metric()
  int64_t best_saved_step_ = -1;  // the step BEST names (the chief's)
  // Where the data sets are read from when the worker keeps none across runs.
  std::unique_ptr<DataCache> own_data_;
  // The chief's checkpoint whose servers may still be writing (training
  // goes on meanwhile: roles/worker/checkpointing.h).
  std::unique_ptr<CheckpointInFlight> checkpoint_;
  uint64_t training_forwards_ = 0;             // keys dropout; restored on resume
  AllReducedWeights::Traffic logged_traffic_;  // at the last traffic line
  TrainStats stats_;
};

}  // namespace pstrain
