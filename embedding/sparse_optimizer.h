// SparseOptimizer: the update of one embedding row from its gradient, with
// the row's optimizer state stored beside it by the caller (SparseTable keeps
// [values | slot 0 | slot 1] contiguous per row). Rows that are not pushed are
// not visited at all, so their values and state stay exactly as they were.
//
// The math per element is optim/dense_optimizer.h's, term for term and in the
// same order of float operations, with the same hyperparameters, so a row
// pushed every step ends where a dense tensor would. Two choices are the
// sparse ones:
//   - Adam is lazy: its bias correction uses the row's own update count t
//     (1 on a row's first update, however late), as TensorFlow's LazyAdam and
//     PyTorch's SparseAdam keep per-row moments.
//   - The lr schedule (lr_decay_steps) counts pushes to the whole table, as
//     the dense optimizer counts pushes to its partition; a rare row does not
//     keep the initial lr forever.
// Weight decay (g = grad + weight_decay * w) is applied to pushed rows only.
//
// Thread-safety: immutable after construction; Update may run on several
// threads at once for different rows.
#pragma once

#include <cstdint>

#include "src/common/optimizer_config.h"

namespace pstrain {

class SparseOptimizer {
 public:
  // `config` must pass ValidateOptimizerConfig; dim > 0.
  SparseOptimizer(const OptimizerConfig& config, int dim);

  // State floats per row element: sgd 0; momentum, adagrad 1; adam, ftrl 2.
  int num_slots() const { return num_slots_; }
  // As DenseOptimizer::slot_name: "momentum"; "m", "v"; "accumulator"; "z", "n".
  const char* slot_name(int k) const;
  // Writes the initial state of one row: num_slots() * dim floats.
  void InitSlots(float* slots) const;

  // The lr for the push after `table_updates` earlier pushes (step decay).
  float ScheduledLr(int64_t table_updates) const;

  // One update of a row: weights (dim floats) and slots (num_slots() * dim)
  // in place from grad (dim floats, not overlapping either). row_step is this
  // update's 1-based number for this row; lr comes from ScheduledLr.
  void Update(float* weights, float* slots, const float* grad, int64_t row_step, float lr) const;

 private:
  const OptimizerConfig config_;
  const int dim_;
  const int num_slots_;
};

}  // namespace pstrain
