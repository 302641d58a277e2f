#include "roles/server/update_core.h"

#include <fmt/format.h>

#include <algorithm>

namespace pstrain {

UpdateCore::UpdateCore(int workers, UpdateMode mode)
    : workers_(workers), mode_(mode), pushes_(workers, 0), arrived_(workers, false) {}

StatusOr<UpdateCore::Take> UpdateCore::Arrive(int worker, int64_t step, const std::string& what) {
  if (worker < 0 || worker >= workers_)
    return InvalidArgument(
        fmt::format("push to {} from worker {}: the job has {} workers", what, worker, workers_));
  // average: a round's weight deltas are gathered as a sync step's gradients.
  if (mode_ != UpdateMode::kSync && mode_ != UpdateMode::kAverage) return Take::kAlone;
  if (step != applied_)
    return FailedPrecondition(fmt::format("worker {} pushed step {} to {}, which is at step {}",
                                          worker, step, what, applied_));
  if (arrived_[worker])
    return FailedPrecondition(
        fmt::format("worker {} pushed step {} to {} twice", worker, step, what));
  if (workers_ == 1) return Take::kAlone;  // nothing to average: no copy to keep
  arrived_[worker] = true;
  ++arrived_count_;
  return arrived_count_ < workers_ ? Take::kGather : Take::kGatherAndApply;
}

void UpdateCore::Applied(Take take, int worker) {
  ++applied_;
  if (take == Take::kAlone) {
    ++pushes_[worker];
  } else {
    std::fill(arrived_.begin(), arrived_.end(), false);
    arrived_count_ = 0;
  }
}

int64_t UpdateCore::clock() const {
  if (mode_ == UpdateMode::kSsp) return *std::min_element(pushes_.begin(), pushes_.end());
  return applied_;
}

int64_t UpdateCore::step() const {
  if (mode_ == UpdateMode::kAsync) return applied_ / workers_;
  return clock();
}

void UpdateCore::AnswerReady() {
  if (waiting_.empty()) return;
  const int64_t now = clock();
  // Walked from a list of its own, so that an answer may wait again
  // (AnswerAt) without touching the list being walked.
  walking_.swap(waiting_);
  for (WaitingPull& w : walking_) {
    if (w.min_clock <= now) {
      w.answer();
    } else {
      waiting_.push_back(std::move(w));
    }
  }
  walking_.clear();
}

void UpdateCore::Restore(int64_t applied, int64_t clock) {
  applied_ = applied;
  std::fill(pushes_.begin(), pushes_.end(), clock);
  std::fill(arrived_.begin(), arrived_.end(), false);
  arrived_count_ = 0;
}

void UpdateCore::RestoreStep(int64_t step) {
  const bool lockstep = mode_ == UpdateMode::kSync || mode_ == UpdateMode::kAverage;
  Restore(lockstep ? step : step * workers_, step);
}

}  // namespace pstrain
