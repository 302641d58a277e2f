// DenseOptimizer: updates one contiguous block of float32 weights (a
// partition of a tensor, as a server holds it) in place from a gradient of the
// same size, by the rule of optim/optimizer_kernel.h over the whole block.
// Servers apply one on every push, so updates are vectorized and allocate
// nothing; all state is allocated once, at construction.
//
// Ownership: an optimizer owns its state slots; Update() borrows the weights
// and gradient for the duration of the call only.
// Thread-safety: none inside; one instance is used by one thread at a time.
// Distinct instances share nothing and may run on different threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "optim/optimizer_kernel.h"
#include "src/common/config/optimizer_config.h"
#include "src/common/status.h"

namespace pstrain {

class DenseOptimizer {
 public:
  // `config` must pass ValidateOptimizerConfig (MakeDenseOptimizer checks).
  DenseOptimizer(const OptimizerConfig& config, size_t size);
  DenseOptimizer(const DenseOptimizer&) = delete;
  DenseOptimizer& operator=(const DenseOptimizer&) = delete;

  // One step: weights[i] is updated with grad[i] for i < size(). Both point
  // to size() floats (any alignment); grad is not modified and must not
  // overlap weights.
  void Update(float* weights, const float* grad);

  // Elements handled, fixed at construction.
  size_t size() const { return size_; }
  // Updates applied so far (adam's bias correction and the lr schedule
  // depend on it).
  uint64_t steps() const { return steps_; }

  // Optimizer state, for checkpoints: slot k (0 <= k < num_slots()) is size()
  // floats owned by this optimizer, valid for its lifetime. Restoring means
  // writing every slot and calling set_steps(). Names as
  // OptimizerKernel::slot_name.
  int num_slots() const { return kernel_.num_slots(); }
  float* slot(int k);
  const char* slot_name(int k) const { return kernel_.slot_name(k); }
  void set_steps(uint64_t steps) { steps_ = steps; }

 private:
  const OptimizerKernel kernel_;
  const size_t size_;
  uint64_t steps_ = 0;
  std::array<std::vector<float>, OptimizerKernel::kMaxSlots> slots_;
};

// Checks the fields that config.type uses (a field another type uses is
// ignored): lr > 0 and weight_decay >= 0 always; momentum in [0, 1);
// beta1, beta2 in [0, 1) and epsilon > 0 for adam and adamw; alpha in
// [0, 1) and epsilon > 0 for rmsprop; epsilon > 0 and initial_accumulator
// >= 0 for adagrad; initial_accumulator > 0, lr_power <= 0, l1 >= 0, l2 >= 0
// and no schedule for ftrl. The schedule: lr_decay in (0, 1] with
// lr_decay_steps, min_lr in [0, lr) with cosine_steps, not both. Every
// checked value must be finite. The error names the optimizer, the field
// and its value.
Status ValidateOptimizerConfig(const OptimizerConfig& config);

// A validated optimizer for `size` elements, its state initialized as above.
StatusOr<std::unique_ptr<DenseOptimizer>> MakeDenseOptimizer(const OptimizerConfig& config,
                                                             size_t size);

// "sgd", "momentum", "adam", "adagrad", "ftrl", "adamw", "rmsprop"; "unknown"
// for a value outside the enum.
const char* OptimizerTypeName(OptimizerType type);

}  // namespace pstrain
