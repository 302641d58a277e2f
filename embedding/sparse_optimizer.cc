#include "embedding/sparse_optimizer.h"

#include <algorithm>
#include <cassert>

namespace pstrain {

SparseOptimizer::SparseOptimizer(const OptimizerConfig& config, int dim)
    : kernel_(config), dim_(dim) {
  assert(dim > 0);
}

void SparseOptimizer::InitSlots(float* slots) const {
  for (int k = 0; k < num_slots(); ++k)
    std::fill(slots + k * dim_, slots + (k + 1) * dim_, kernel_.initial_slot_value(k));
}

void SparseOptimizer::Update(float* weights, float* slots, const float* grad, int64_t row_step,
                             float lr) const {
  float* const row_slots[OptimizerKernel::kMaxSlots] = {slots, slots + dim_};
  kernel_.Apply(kernel_.Prepare(lr, static_cast<uint64_t>(row_step)), weights, row_slots, grad,
                static_cast<size_t>(dim_));
}

}  // namespace pstrain
