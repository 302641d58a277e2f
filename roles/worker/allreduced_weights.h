// AllReducedWeights: the parameters marked `ps: false`, which live on every
// worker instead of the servers (MindSpore's hybrid mode).
//
// Each step their gradients are averaged among the workers (the collective,
// fused into buckets) and every worker applies the same optimizer to the same
// average, so the copies stay identical without ever being sent again. Before
// training, worker 0's values and optimizer state are broadcast, so every
// copy starts equal (from the seed, or from worker 0's checkpoint file).
//
// Two ways to send less (docs/compression.md):
//   - compression: a tensor whose CompressionFor() is threshold has its
//     gradient threshold-encoded and all-gathered instead of all-reduced
//     (roles/worker/compressed_allreduce.h); every worker decodes the same bytes in
//     the same order, so the copies stay identical, bit for bit; a
//     compressed tensor whose optimizer is momentum is momentum-corrected
//     (MomentumCorrected, optim/momentum_correction.h): each worker encodes its
//     own masked momentum and every worker applies sgd (same lr, schedule
//     and weight decay) to the average, so it has no optimizer slot here;
//   - train.mode: average (parameter averaging, as Deeplearning4j's
//     ParameterAveragingTrainingMaster): each worker applies its optimizer to
//     its own gradient, and at the steps the caller names (every
//     average_every steps, epoch ends, checkpoints, the end) the values and
//     the optimizer slots are averaged (DL4J's averageUpdaters: true), so the
//     copies are identical again, momentum included.
//
// A layer's statistics (batch_norm's running mean and variance,
// Param::trainable false) are here too, whatever the rules say: no gradient
// of theirs is averaged and no optimizer runs on them, so between the
// points where the caller averages them (AverageStatistics: checkpoint steps
// and epoch ends, so the chief evaluates and saves the workers' mean) each
// worker's follow its own batches (as DDP's without broadcast_buffers).
// Those of a batch_norm with sync_stats (Param::synced_each_step) are
// averaged every step, in the gradients' buckets. The chief's are broadcast
// at the start, and mode average averages them with the weights.
//
// Checkpoints: worker 0 writes one file per checkpoint step with every value
// and optimizer slot ("<param>/value", "<param>/<slot>"), plus the update
// count; on resume worker 0 reads it back and the broadcast hands it out.
// With compression, every worker's encoders (residuals, tau, momentum) are
// all-gathered at each checkpoint step and written too ("encoders/<rank>"),
// and on resume each worker gets its own back (unless the worker count
// changed: then the residuals start at zero), so a resumed run goes on as
// if it had not stopped.
//
// Ownership: the Params belong to the model and must outlive this object.
// Threads: used by the worker's training thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/collective/collective.h"
#include "comm/collective/tensor_buckets.h"
#include "optim/dense_optimizer.h"
#include "optim/threshold_codec.h"
#include "roles/checkpoint/step_files.h"
#include "roles/worker/compressed_allreduce.h"
#include "src/common/config/config.h"
#include "src/nn/layer.h"

namespace pstrain {

class AllReducedWeights {
 public:
  // Gradients are fused into buckets of this many bytes (PyTorch DDP's
  // default is 25 MiB; 4 MiB keeps the staging copies small).
  static constexpr int64_t kBucketBytes = 4 << 20;

  // `params`: the model's ps: false parameters; each gets the optimizer its
  // parameters: rule (or train.optimizer) names.
  static StatusOr<std::unique_ptr<AllReducedWeights>> Create(const Config& config,
                                                             std::vector<Param*> params);

  bool empty() const { return entries_.empty(); }
  // Elements in every trained value tensor together (a layer's statistics
  // left out: no gradient of theirs is sent).
  int64_t elements() const;

  // Every worker: worker 0's values and optimizer state become everyone's,
  // and the optimizers count `updates_done` updates (the resumed step).
  Status BroadcastFromChief(Collective& collective, int64_t updates_done);
  // Every worker, after backward, once per step: the gradients averaged
  // among the workers (dense ones all-reduced unless `dense_reduced`, when
  // NCCL already did it on the GPU; compressed ones all-gathered), then the
  // optimizers. Mode average: the optimizers on this worker's own
  // gradients, then, if `average_due`, AverageWeights().
  Status ReduceAndApply(Collective& collective, bool dense_reduced = false,
                        bool average_due = false);
  // ReduceAndApply in two: the gradients averaged among the workers, then
  // (once the step is known to stand: a step of a sync elastic job can be
  // called off and trained again, roles/worker/trainer_lost.cc) the
  // optimizers, and the averaging when due.
  Status Reduce(Collective& collective, bool dense_reduced);
  Status ApplyReduced(Collective& collective, bool average_due);
  // train.clip_norm, between Reduce and ApplyReduced: the squared L2 norm
  // of the averaged gradients (the same on every worker), and them scaled
  // by `factor`. A layer's statistics have no gradient and are left out.
  double SquaredGradNorm() const;
  void ScaleGrads(float factor);
  // Mode average: every value and optimizer slot becomes the workers' mean.
  Status AverageWeights(Collective& collective);
  // Every worker: the layers' statistics become the workers' mean.
  Status AverageStatistics(Collective& collective);
  bool has_statistics() const { return stats_ != nullptr; }
  bool Contains(const Param* param) const;
  // Whether `param`'s gradient is all-reduced densely each step (what NCCL
  // may do on the GPU): not when compressed, nor in mode average.
  bool ReducesDense(const Param* param) const;
  bool averaging() const { return averaging_; }

  // The epoch (0-based) the next steps are in, for the compressed
  // gradients' warm-up (CompressedAllReduce::SetEpoch).
  void SetEpoch(int64_t epoch) { compressed_.SetEpoch(epoch); }
  // Totals of this worker's encoders (zero when nothing is compressed).
  CompressionCounters compression_counters() const { return compressed_.counters(); }
  // What this worker has handed to the collectives for training so far:
  // tensor bytes of gradients, packed messages and averaged state (not the
  // initial broadcast; nothing with one worker), for the progress lines.
  struct Traffic {
    int64_t steps = 0;
    int64_t bytes = 0;
    CompressionCounters compression;
  };
  Traffic traffic() const { return {steps_, collective_bytes_, compressed_.counters()}; }
  // One line on the traffic between `before` and `now`: bytes per step
  // against dense gradients' bytes, and the encoders' density and tau.
  std::string DescribeTraffic(const Traffic& before, const Traffic& now) const;

  // Every worker, after the step that a checkpoint will save (`step` steps
  // done): the encoders' states all-gathered, for Save() on worker 0.
  Status GatherEncoderStates(Collective& collective, int64_t step);
  // Worker 0: writes the file into `step_dir`; returns its name there.
  StatusOr<std::string> Save(const std::string& step_dir, int64_t step) const;
  // Worker 0: reads the file of checkpoint `step` from `step_dir`. Every
  // tensor must be there with its size; the error names what is not.
  Status Load(const std::string& step_dir, int64_t step);

 private:
  struct Entry {
    Param* param;
    std::unique_ptr<DenseOptimizer> optimizer;  // sgd, never applied, for a statistic
    bool compressed = false;
    bool trainable = true;  // false: a layer's statistic (Param::trainable)
  };
  AllReducedWeights() = default;
  void Apply();

  std::vector<Entry> entries_;
  bool averaging_ = false;                // train.mode: average
  std::unique_ptr<TensorBuckets> grads_;  // every uncompressed grad
  int64_t dense_grad_floats_ = 0;         // their elements
  CompressedAllReduce compressed_;        // the compressed ones
  std::unique_ptr<TensorBuckets> state_;  // every value and optimizer slot
  std::unique_ptr<TensorBuckets> stats_;  // the layers' statistics; null: none
  // Mode average: the statistics averaged every step (sync_stats); null: none.
  std::unique_ptr<TensorBuckets> synced_stats_;
  int64_t state_floats_ = 0;
  int64_t collective_bytes_ = 0;
  int64_t steps_ = 0;  // Reduce() calls
  // Every worker's encoder state: gathered at step encoder_states_step_ (for
  // Save), or read by Load (for BroadcastFromChief); indexed by rank.
  std::vector<std::vector<uint8_t>> encoder_states_;
  int64_t encoder_states_step_ = -1;
};

}  // namespace pstrain
