#include "roles/server/update_core.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace pstrain {

UpdateCore::UpdateCore(int workers, UpdateMode mode) : UpdateCore(workers, workers, mode) {}

UpdateCore::UpdateCore(int slots, int members, UpdateMode mode)
    : mode_(mode),
      pushes_(slots, 0),
      members_(slots, false),
      member_count_(members),
      arrived_(slots, false),
      lost_(slots, false) {
  std::fill(members_.begin(), members_.begin() + members, true);
}

StatusOr<double> UpdateCore::HeldNorm(int64_t step, const std::string& what) const {
  if (step == norm_step_) return squared_norm_;
  if (norm_step_ < 0)
    return FailedPrecondition(
        fmt::format("the norm of step {} of {}, which has held no step", step, what));
  return FailedPrecondition(
      fmt::format("the norm of step {} of {}, whose last held step is {}", step, what, norm_step_));
}

std::vector<int> UpdateCore::members() const {
  std::vector<int> ranks;
  for (int r = 0; r < slots(); ++r)
    if (members_[r]) ranks.push_back(r);
  return ranks;
}

Status UpdateCore::ChangeMembers(int64_t from_step, std::vector<int> members) {
  if (members.empty()) return InvalidArgument("a change of members leaves no worker");
  std::vector<bool> set(pushes_.size(), false);
  for (int r : members) {
    if (r < 0 || r >= slots())
      return InvalidArgument(fmt::format("member rank {} is not in 0..{}", r, slots() - 1));
    if (set[r]) return InvalidArgument(fmt::format("member rank {} is named twice", r));
    set[r] = true;
  }
  const int64_t now = step();
  if (from_step < now || (from_step == now && arrived_count_ > 0))
    return FailedPrecondition(
        fmt::format("a change of members from step {}: the job is at step {}{}", from_step, now,
                    from_step == now ? ", whose pushes have begun" : ""));
  if (!changes_.empty() && from_step < changes_.back().from_step)
    return FailedPrecondition(fmt::format("a change of members from step {} after one from step {}",
                                          from_step, changes_.back().from_step));
  changes_.push_back({from_step, std::move(set)});
  TakeDueChange();
  return Status::OK();
}

Status UpdateCore::Renumber(int64_t step, const std::vector<int>& ranks, int workers) {
  // async and ssp count pushes: their step() is the job's only roughly.
  const bool in_steps = mode_ == UpdateMode::kSync || mode_ == UpdateMode::kAverage;
  if (arrived_count_ > 0 || (in_steps && step != this->step()) || !changes_.empty())
    return FailedPrecondition(
        fmt::format("a change of workers at step {}: this part is at step {}{}", step, this->step(),
                    arrived_count_ > 0 ? ", whose pushes have begun" : ""));
  if (workers < 1 || ranks.size() != pushes_.size())
    return InvalidArgument(fmt::format("a change of workers names {} ranks, the job has {}",
                                       ranks.size(), pushes_.size()));
  // A joiner's pushes count from here: they are steps (async's clock
  // counts every push).
  const int64_t start = mode_ == UpdateMode::kAsync ? step : clock();
  std::vector<int64_t> pushes(static_cast<size_t>(workers), start);
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r] >= workers)
      return InvalidArgument(fmt::format("worker {} takes rank {} of {}", r, ranks[r], workers));
    if (ranks[r] >= 0) pushes[static_cast<size_t>(ranks[r])] = pushes_[r];
  }
  // async: the steps so far stay counted at the old member count.
  async_base_step_ = step;
  async_base_applied_ = applied_;
  pushes_ = std::move(pushes);
  members_.assign(static_cast<size_t>(workers), true);
  member_count_ = workers;
  arrived_.assign(static_cast<size_t>(workers), false);
  lost_.assign(static_cast<size_t>(workers), false);
  called_off_ = -1;
  called_off_why_.clear();
  return Status::OK();
}

void UpdateCore::TakeDueChange() {
  while (!changes_.empty() && changes_.front().from_step <= step()) {
    const int64_t start = mode_ == UpdateMode::kAsync ? step() : clock();
    std::vector<bool>& next = changes_.front().members;
    for (int r = 0; r < slots(); ++r)
      if (next[r] && !members_[r]) pushes_[r] = start;
    // async: the steps so far stay counted at the old member count.
    async_base_step_ = step();
    async_base_applied_ = applied_;
    members_ = std::move(next);
    member_count_ = static_cast<int>(std::count(members_.begin(), members_.end(), true));
    changes_.erase(changes_.begin());
  }
}

StatusOr<UpdateCore::Take> UpdateCore::Arrive(int worker, int64_t step, const std::string& what) {
  if (worker < 0 || worker >= slots())
    return InvalidArgument(
        fmt::format("push to {} from worker {}: the job has {} workers", what, worker, slots()));
  if (lost_[worker])
    return FailedPrecondition(
        fmt::format("push to {} from worker {}: the job counts it as lost", what, worker));
  if (CalledOff(step + 1))
    return Cancelled(fmt::format("push of step {} to {}: {}", step, what, called_off_why_));
  if (!members_[worker])
    return FailedPrecondition(
        fmt::format("push to {} from worker {}: it is not a member of the job at step {}", what,
                    worker, this->step()));
  // average: a round's weight deltas are gathered as a sync step's gradients.
  if (mode_ != UpdateMode::kSync && mode_ != UpdateMode::kAverage) return Take::kAlone;
  if (step != applied_)
    return FailedPrecondition(fmt::format("worker {} pushed step {} to {}, which is at step {}",
                                          worker, step, what, applied_));
  if (arrived_[worker])
    return FailedPrecondition(
        fmt::format("worker {} pushed step {} to {} twice", worker, step, what));
  // Nothing to average: no copy to keep, unless the step is held.
  if (member_count_ == 1 && !hold_) return Take::kAlone;
  arrived_[worker] = true;
  ++arrived_count_;
  return arrived_count_ < member_count_ ? Take::kGather : Take::kGatherAndApply;
}

void UpdateCore::Applied(Take take, int worker) {
  ++applied_;
  last_applied_worker_ = take == Take::kAlone ? worker : -1;
  if (take == Take::kAlone) {
    ++pushes_[worker];
  } else {
    std::fill(arrived_.begin(), arrived_.end(), false);
    arrived_count_ = 0;
  }
  TakeDueChange();
}

Status UpdateCore::Replay(int worker) {
  if (worker < -1 || worker >= slots())
    return InvalidArgument(
        fmt::format("an update of worker {} replayed: the job has {} workers", worker, slots()));
  if (arrived_count_ > 0)
    return FailedPrecondition("an update replayed on a core that gathers a step itself");
  Applied(worker < 0 ? Take::kGatherAndApply : Take::kAlone, worker);
  return Status::OK();
}

int64_t UpdateCore::clock() const {
  if (mode_ != UpdateMode::kSsp) return applied_;
  int64_t slowest = INT64_MAX;
  for (int r = 0; r < slots(); ++r)
    if (members_[r]) slowest = std::min(slowest, pushes_[r]);
  return slowest;
}

int64_t UpdateCore::step() const {
  if (mode_ == UpdateMode::kAsync)
    return async_base_step_ + (applied_ - async_base_applied_) / member_count_;
  return clock();
}

StatusOr<int64_t> UpdateCore::Lose(int rank) {
  if (mode_ == UpdateMode::kAverage)
    return FailedPrecondition("a job in mode average cannot go on without a lost worker");
  if (rank < 0 || rank >= slots())
    return InvalidArgument(fmt::format("lost worker {} is not in 0..{}", rank, slots() - 1));
  lost_[rank] = true;
  if (!members_[rank]) return int64_t{-1};
  if (mode_ == UpdateMode::kSync) return arrived_[rank] ? applied_ : applied_ - 1;
  // async and ssp: its pushes are its steps, in order. It leaves the set at
  // once, so that the ssp clock no longer waits for it.
  if (member_count_ == 1)
    return FailedPrecondition(fmt::format("worker {} was the only member", rank));
  async_base_step_ = step();
  async_base_applied_ = applied_;
  members_[rank] = false;
  --member_count_;
  return pushes_[rank] - 1;
}

StatusOr<bool> UpdateCore::DropLost(int rank, int64_t last, const std::string& why) {
  if (mode_ != UpdateMode::kSync)
    return FailedPrecondition("only a sync job finishes a step without a lost worker");
  if (rank < 0 || rank >= slots() || !lost_[rank])
    return FailedPrecondition(fmt::format("worker {} was not reported lost here", rank));
  if (applied_ != last && applied_ != last + 1)
    return FailedPrecondition(fmt::format(
        "finishing step {} without worker {}: this part is at step {}", last, rank, applied_));
  called_off_ = last + 1;
  called_off_why_ = why;
  RefuseCalledOff();
  if (applied_ == last + 1) {  // step `last` is done here; the next is called off
    std::fill(arrived_.begin(), arrived_.end(), false);
    arrived_count_ = 0;
    return false;
  }
  // Its gradient, when in, counts: the step waits for the others' as before.
  if (arrived_[rank] || !members_[rank]) return false;
  members_[rank] = false;
  --member_count_;
  return arrived_count_ > 0 && arrived_count_ == member_count_;
}

void UpdateCore::RefuseCalledOff() {
  walking_.swap(waiting_);
  for (WaitingPull& w : walking_) {
    if (!CalledOff(w.min_clock)) {
      waiting_.push_back(std::move(w));
    } else {
      w.answer(&called_off_why_);
    }
  }
  walking_.clear();
}

void UpdateCore::AnswerReady() {
  if (waiting_.empty()) return;
  const int64_t now = clock(), gathered = gathered_clock();
  // Walked from a list of its own, so that an answer may wait again
  // (AnswerAt) without touching the list being walked.
  walking_.swap(waiting_);
  for (WaitingPull& w : walking_) {
    if (w.min_clock <= (w.held ? gathered : now)) {
      w.answer(nullptr);
    } else {
      waiting_.push_back(std::move(w));
    }
  }
  walking_.clear();
}

void UpdateCore::Restore(int64_t applied, int64_t clock) {
  applied_ = applied;
  std::fill(lost_.begin(), lost_.end(), false);
  called_off_ = -1;
  async_base_step_ = async_base_applied_ = 0;
  std::fill(pushes_.begin(), pushes_.end(), clock);
  std::fill(arrived_.begin(), arrived_.end(), false);
  arrived_count_ = 0;
  holding_ = false;
  norm_step_ = clipped_step_ = -1;
}

UpdateCore::State UpdateCore::Save() const {
  State s{applied_, pushes_, members_, async_base_step_, async_base_applied_, {}};
  for (const MemberChange& c : changes_) s.changes.emplace_back(c.from_step, c.members);
  return s;
}

Status UpdateCore::Load(const State& s) {
  const size_t n = pushes_.size();
  bool fits = s.pushes.size() == n && s.members.size() == n;
  for (const auto& [step, members] : s.changes) fits = fits && members.size() == n;
  if (!fits)
    return InvalidArgument(
        fmt::format("an update state of {} worker slots for a core of {}", s.pushes.size(), n));
  const int count = static_cast<int>(std::count(s.members.begin(), s.members.end(), true));
  if (count == 0 || s.applied < 0) return InvalidArgument("an update state with no members");
  applied_ = s.applied;
  pushes_ = s.pushes;
  members_ = s.members;
  member_count_ = count;
  async_base_step_ = s.async_base_step;
  async_base_applied_ = s.async_base_applied;
  changes_.clear();
  for (const auto& [step, members] : s.changes) changes_.push_back({step, members});
  std::fill(arrived_.begin(), arrived_.end(), false);
  arrived_count_ = 0;
  holding_ = false;
  norm_step_ = clipped_step_ = -1;
  return Status::OK();
}

void UpdateCore::RestoreStep(int64_t step) {
  const bool lockstep = mode_ == UpdateMode::kSync || mode_ == UpdateMode::kAverage;
  Restore(lockstep ? step : step * member_count_, step);
}

}  // namespace pstrain
