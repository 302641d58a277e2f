// PsAveraging: parameter averaging of the PS weights (train.mode: average),
// the worker's side.
//
// Each worker keeps its own copy of the PS weights (the model's Params) and
// its own optimizer per tensor (OptimizerFor), and trains locally; nothing
// goes to the servers between averagings. Every `average_every` steps and
// at the job's last step (a round):
//   1. the worker pushes delta = w_local - w_anchor (w_anchor: the weights
//      it last pulled) for round r = step / average_every,
//   2. each server waits for every worker's delta of round r (as sync waits
//      for a step's gradients), adds their mean to its weights, no optimizer,
//   3. the worker pulls the result (min_clock r + 1) and anchors on it.
// Right after a round every worker holds the same weights. The local
// optimizers keep their state (momentum, adam's moments) across rounds, and
// checkpoints (taken only right after a round) keep it too, each worker its
// own (roles/worker/ps_state.h).
//
// Threads: used by the training thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "optim/dense_optimizer.h"
#include "src/common/checkpoint_file.h"
#include "src/common/config/config.h"
#include "src/nn/layer.h"

namespace pstrain {

class PsAveraging {
 public:
  // `params`: the PS weights, in PsTensors() order.
  static StatusOr<std::unique_ptr<PsAveraging>> Create(const Config& config,
                                                       std::vector<Param*> params);

  // After every pull of the weights: they are the new anchor. `steps`: the
  // steps done (the local optimizers' lr schedule continues from there).
  void Anchor(int64_t steps);
  // One local step: each optimizer applies its tensor's gradient here.
  void LocalStep();
  // The round step `step` belongs to (its push's clock).
  int64_t Round(int64_t step) const { return step / every_; }
  // Checkpoints: every local optimizer slot, as section
  // "optimizer/<param>/<slot>". The weights need no saving: right after a
  // round they are the servers', and the schedule's place is the step.
  std::vector<Section> State() const;
  // Restores what State() gave, read back from a file, all checked first.
  Status Restore(const SectionsByName& sections);
  // Fills and returns tensor t's delta w_local - w_anchor (valid until the
  // next call for t).
  float* Delta(size_t t);

 private:
  PsAveraging(int64_t every, std::vector<Param*> params) : every_(every), params_(params) {}

  const int64_t every_;
  std::vector<Param*> params_;
  std::vector<std::unique_ptr<DenseOptimizer>> optimizers_;
  std::vector<std::vector<float>> anchors_, deltas_;
};

}  // namespace pstrain
