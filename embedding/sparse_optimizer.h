// SparseOptimizer: the update of one embedding row from its gradient, by the
// rule of optim/optimizer_kernel.h over the row's dim elements, with the
// row's optimizer state stored beside it by the caller (SparseTable keeps
// [values | slot 0 | slot 1] contiguous per row). Rows that are not pushed
// are not visited at all, so their values and state stay exactly as they
// were. A row pushed every step ends exactly where a dense tensor would.
// Two choices are the sparse ones:
//   - Adam and AdamW are lazy: their bias correction uses the row's own update count t
//     (1 on a row's first update, however late), as TensorFlow's LazyAdam and
//     PyTorch's SparseAdam keep per-row moments.
//   - The lr schedule (warm-up, step or cosine decay) counts pushes to the whole table, as
//     the dense optimizer counts pushes to its partition; a rare row does not
//     keep the initial lr forever.
// Weight decay (L2, or adamw's own) is applied to pushed rows only.
//
// Thread-safety: immutable after construction; Update may run on several
// threads at once for different rows.
#pragma once

#include <cstdint>

#include "optim/optimizer_kernel.h"
#include "src/common/config/optimizer_config.h"

namespace pstrain {

class SparseOptimizer {
 public:
  // `config` must pass ValidateOptimizerConfig; dim > 0.
  SparseOptimizer(const OptimizerConfig& config, int dim);

  // State floats per row element: sgd 0; momentum, adagrad, rmsprop 1; adam,
  // adamw, ftrl 2.
  int num_slots() const { return kernel_.num_slots(); }
  // As DenseOptimizer::slot_name.
  const char* slot_name(int k) const { return kernel_.slot_name(k); }
  // Writes the initial state of one row: num_slots() * dim floats.
  void InitSlots(float* slots) const;

  // The lr for the push after `table_updates` earlier pushes (its schedule).
  float ScheduledLr(int64_t table_updates) const {
    return kernel_.ScheduledLr(static_cast<uint64_t>(table_updates));
  }

  // One update of a row: weights (dim floats) and slots (num_slots() * dim)
  // in place from grad (dim floats, not overlapping either). row_step is this
  // update's 1-based number for this row; lr comes from ScheduledLr.
  void Update(float* weights, float* slots, const float* grad, int64_t row_step, float lr) const;

 private:
  const OptimizerKernel kernel_;
  const int dim_;
};

}  // namespace pstrain
