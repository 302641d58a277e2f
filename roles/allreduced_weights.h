// AllReducedWeights: the parameters marked `ps: false`, which live on every
// worker instead of the servers (MindSpore's hybrid mode).
//
// Each step their gradients are averaged among the workers (the collective,
// fused into buckets) and every worker applies the same optimizer to the same
// average, so the copies stay identical without ever being sent again. Before
// training, worker 0's values and optimizer state are broadcast, so every
// copy starts equal (from the seed, or from worker 0's checkpoint file).
//
// Checkpoints: worker 0 writes one file per checkpoint step with every value
// and optimizer slot ("<param>/value", "<param>/<slot>"), plus the update
// count; on resume worker 0 reads it back and the broadcast hands it out.
//
// Ownership: the Params belong to the model and must outlive this object.
// Threads: used by the worker's training thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/collective.h"
#include "comm/tensor_buckets.h"
#include "optim/dense_optimizer.h"
#include "src/common/config.h"
#include "src/nn/layer.h"

namespace pstrain {

class AllReducedWeights {
 public:
  // Gradients are fused into buckets of this many bytes (PyTorch DDP's
  // default is 25 MiB; 4 MiB keeps the staging copies small).
  static constexpr int64_t kBucketBytes = 4 << 20;
  // The checkpoint file's name inside a step directory.
  static constexpr const char* kFileName = "allreduced-weights";

  // `params`: the model's ps: false parameters; each gets the optimizer its
  // parameters: rule (or train.optimizer) names.
  static StatusOr<std::unique_ptr<AllReducedWeights>> Create(const Config& config,
                                                             std::vector<Param*> params);

  bool empty() const { return entries_.empty(); }
  // Elements in every value tensor together.
  int64_t elements() const;

  // Every worker: worker 0's values and optimizer state become everyone's,
  // and the optimizers count `updates_done` updates (the resumed step).
  Status BroadcastFromChief(Collective& collective, int64_t updates_done);
  // Every worker, after backward: averages the gradients among the workers
  // and applies the optimizers.
  Status ReduceAndApply(Collective& collective);
  // The optimizers alone, for gradients already averaged (NCCL on the GPU).
  void Apply();
  bool Contains(const Param* param) const;

  // Worker 0: writes the file into `step_dir`; returns its name there.
  StatusOr<std::string> Save(const std::string& step_dir, int64_t step) const;
  // Worker 0: reads the file of checkpoint `step` from `step_dir`. Every
  // tensor must be there with its size; the error names what is not.
  Status Load(const std::string& step_dir, int64_t step);

 private:
  struct Entry {
    Param* param;
    std::unique_ptr<DenseOptimizer> optimizer;
  };
  AllReducedWeights() = default;

  std::vector<Entry> entries_;
  std::unique_ptr<TensorBuckets> grads_;  // every grad
  std::unique_ptr<TensorBuckets> state_;  // every value and optimizer slot
};

}  // namespace pstrain
