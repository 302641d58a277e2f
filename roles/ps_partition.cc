#include "roles/ps_partition.h"

#include <fmt/format.h>

#include <algorithm>

namespace pstrain {

PsPartition::PsPartition(std::string tensor, uint32_t part, int workers, UpdateMode mode,
                         std::unique_ptr<DenseOptimizer> optimizer, std::vector<float> values)
    : tensor_(std::move(tensor)),
      part_(part),
      workers_(workers),
      mode_(mode),
      optimizer_(std::move(optimizer)),
      values_(std::make_shared<FloatBuffer>(values.begin(), values.end())),
      pushes_(workers, 0),
      arrived_(workers, false) {}

std::string PsPartition::Name() const { return fmt::format("'{}' partition {}", tensor_, part_); }

int64_t PsPartition::clock() const {
  if (mode_ == UpdateMode::kSsp) return *std::min_element(pushes_.begin(), pushes_.end());
  return applied_;
}

void PsPartition::RestoreClock(int64_t applied, int64_t clock) {
  applied_ = applied;
  std::fill(pushes_.begin(), pushes_.end(), clock);
}

FloatBuffer& PsPartition::WritableValues() {
  // Values still referenced by a pull reply in flight are left alone: the
  // update goes to a fresh copy.
  if (values_.use_count() > 1) values_ = std::make_shared<FloatBuffer>(*values_);
  return *values_;
}

void PsPartition::Apply(const float* grad) {
  optimizer_->Update(WritableValues().data(), grad);
  ++applied_;
}

Status PsPartition::Push(int worker, int64_t clock, const float* grad) {
  if (worker < 0 || worker >= workers_)
    return InvalidArgument(
        fmt::format("push to {} from worker {}: the job has {} workers", Name(), worker, workers_));
  if (mode_ != UpdateMode::kSync) {
    Apply(grad);
    ++pushes_[worker];
    return Status::OK();
  }
  if (clock != applied_)
    return FailedPrecondition(fmt::format("worker {} pushed step {} to {}, which is at step {}",
                                          worker, clock, Name(), applied_));
  if (arrived_[worker])
    return FailedPrecondition(
        fmt::format("worker {} pushed step {} to {} twice", worker, clock, Name()));
  if (workers_ == 1) {  // nothing to average: skip the copy
    ++pushes_[worker];
    Apply(grad);
    return Status::OK();
  }
  const size_t n = size();
  if (arrived_count_ == 0) {
    sum_.assign(grad, grad + n);
  } else {
    for (size_t i = 0; i < n; ++i) sum_[i] += grad[i];
  }
  arrived_[worker] = true;
  ++pushes_[worker];
  if (++arrived_count_ < workers_) return Status::OK();
  // Every worker is in: one update with the average.
  if (workers_ > 1) {
    const float scale = 1.0f / static_cast<float>(workers_);
    for (float& g : sum_) g *= scale;
  }
  Apply(sum_.data());
  std::fill(arrived_.begin(), arrived_.end(), false);
  arrived_count_ = 0;
  return Status::OK();
}

}  // namespace pstrain
