#include "roles/server/partition.h"

#include <fmt/format.h>

namespace pstrain {

PsPartition::PsPartition(std::string tensor, uint32_t part, int workers, UpdateMode mode,
                         std::unique_ptr<DenseOptimizer> optimizer, std::vector<float> values)
    : tensor_(std::move(tensor)),
      part_(part),
      name_(fmt::format("'{}' partition {}", tensor_, part_)),
      optimizer_(std::move(optimizer)),
      values_(std::make_shared<FloatBuffer>(values.begin(), values.end())),
      average_(mode == UpdateMode::kAverage),
      core_(workers, mode) {}

FloatBuffer& PsPartition::WritableValues() {
  // Values still referenced by a pull reply in flight are left alone: the
  // update goes to a fresh copy.
  if (values_.use_count() > 1) values_ = std::make_shared<FloatBuffer>(*values_);
  return *values_;
}

// Mode average: the update is the workers' mean weight change, added as it
// is (their own optimizers already made it); otherwise a gradient for the
// optimizer.
void PsPartition::Apply(const float* grad) {
  last_update_ = grad;
  if (!average_) return optimizer_->Update(WritableValues().data(), grad);
  float* values = WritableValues().data();
  for (size_t i = 0; i < size(); ++i) values[i] += grad[i];
}

Status PsPartition::Push(int worker, int64_t clock, const float* grad) {
  const size_t n = size();
  Status st = core_.Push(
      worker, clock, name_,
      [&] {
        Apply(grad);
        return Status::OK();
      },
      [&](int, bool first) {
        if (first) {
          sum_.assign(grad, grad + n);
        } else {
          for (size_t i = 0; i < n; ++i) sum_[i] += grad[i];
        }
      },
      [&](float scale) { return ApplySum(scale); });
  if (st.ok() && core_.holding() && !core_.NormNoted()) {
    // The mean as ApplySum will round it, squared in double.
    const float scale = 1.0f / static_cast<float>(core_.member_count());
    double squares = 0;
    for (float g : sum_) {
      const double mean = g * scale;
      squares += mean * mean;
    }
    core_.NoteHeldNorm(squares);
  }
  return st;
}

Status PsPartition::Clip(int64_t step, float clip) {
  return core_.ApplyHeld(step, clip, name_, [&](float scale) { return ApplySum(scale, clip); });
}

Status PsPartition::ApplySum(float scale, float clip) {
  for (float& g : sum_) g *= scale;
  if (clip != 1.0f)
    for (float& g : sum_) g *= clip;
  Apply(sum_.data());
  return Status::OK();
}

Status PsPartition::Replay(int worker, const float* update) {
  PSTRAIN_RETURN_IF_ERROR(core_.Replay(worker).WithContext(name_));
  Apply(update);
  return Status::OK();
}

Status PsPartition::FinishWithout(int rank, int64_t last, const std::string& why) {
  return core_.FinishWithout(rank, last, why, [&](float scale) { return ApplySum(scale); });
}

}  // namespace pstrain
