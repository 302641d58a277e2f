// UpdateCore: the one rule for when a server applies workers' gradients and
// which pulls it may answer. Dense partitions (roles/server/partition.h) and
// embedding tables (roles/server/table_host.h) both use it; they differ only in how
// values are found and stored, which they say through the three calls of
// ApplyFns.
//
// Clocks. A worker's clock is the step it is on; a pull carries min_clock,
// and is answered once clock() >= min_clock:
//   sync  - steps applied. A step's update runs once every worker's gradient
//           for that step is in, as their average; a push for any other step,
//           or a worker's second push of a step, is refused.
//   async - pushes applied, each on arrival; pulls never wait (min_clock 0).
//   ssp   - pushes applied on arrival; the clock is the smallest number of
//           pushes received from any one worker (the slowest worker's step).
//           A worker pulling for step c asks for min_clock c - staleness, so
//           it waits while the slowest worker is more than `staleness` behind.
//   average - as sync, with a round of weight deltas (every average_every
//           steps) in place of a step's gradients: the clock counts rounds.
// step() is the job's step as this update sees it (row ages, logs,
// checkpoints): the clock in sync and ssp, pushes / workers in async.
//
// Members. A job's workers hold ranks 0..slots-1; the members are the ranks
// whose pushes count. A fixed-shape job's members are all its workers. An
// elastic job changes them at a step boundary the scheduler agreed
// (ChangeMembers): from that step on, a sync step waits for the new set and
// averages over it, the ssp clock is the slowest new member's, and a push
// from a rank outside the set is refused.
//
// A lost worker (an elastic job that goes on without it, roles/scheduler/
// lost_worker.cc): Lose(rank) refuses its pushes from then on and says the
// last step it had a gradient in here. In sync, FinishWithout(rank, last)
// then completes step `last` without it (its gradient counts where it
// came, as the average's divisor does) and calls off every later step:
// what was gathered for it is dropped, and its pushes and the pulls
// waiting for it are refused, until the live change of workers at step
// last + 1 (Renumber). In async and ssp nothing waits for it: Lose takes
// it out of the members at once, and the others go on to the change.
//
// Clipping by the global norm (train.clip_norm, sync only; HoldSteps): a
// step whose every gradient is in, one worker's included, is held instead
// of applied. The workers ask each part for its share of the step's
// squared norm (AnswerHeldAt), add the shares and send each part the one
// factor min(1, clip_norm / norm), which applies the held step times it
// (ApplyHeld). Pulls wait on the clock as before, so none sees the step
// before its factor came.
//
// Threads: owned by one thread (the partition's or the table's); nothing
// here locks. Waiting pulls run on that thread, from Push.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "src/common/config/config.h"
#include "src/common/status.h"

namespace pstrain {

class UpdateCore {
 public:
  // Everything that decides what the core takes next, between steps (no
  // gradient of a step gathered): what a partition moved live to another
  // server carries (roles/server/handoff.h), so that the new owner goes on
  // exactly where the old one stopped, in every mode.
  struct State {
    int64_t applied = 0;
    std::vector<int64_t> pushes;  // per slot
    std::vector<bool> members;    // per slot
    int64_t async_base_step = 0;
    int64_t async_base_applied = 0;
    std::vector<std::pair<int64_t, std::vector<bool>>> changes;  // announced: step, members
  };

  // `workers` ranks, all members.
  UpdateCore(int workers, UpdateMode mode);
  // `slots` ranks (an elastic job's most workers), the first `members` of
  // them members.
  UpdateCore(int slots, int members, UpdateMode mode);

  // From step `from_step` (sync and average: the clock; ssp and async: the
  // job's step()) on, the members are `members` (distinct ranks < slots, at
  // least one). The step may not be one whose pushes have begun to arrive,
  // nor before the current clock, nor before a change already announced;
  // the error says which. A rank that joins starts its ssp clock at the
  // clock of the step it joins at, so that it neither holds the others back
  // nor is waited for over the steps it never ran.
  Status ChangeMembers(int64_t from_step, std::vector<int> members);
  // A live change of workers (roles/scheduler/live_workers.cc), between
  // steps at the job's step `step` (in sync, this core's step(); async
  // goes on counting from it): the worker of rank r holds rank
  // ranks[r] from now on (-1: it left), of `workers`, all members; a rank no
  // worker of today takes is a joiner, whose ssp clock starts here. What a
  // lost worker left (its refusal, steps called off) is forgotten: the job
  // goes on with the new set.
  Status Renumber(int64_t step, const std::vector<int>& ranks, int workers);
  int slots() const { return static_cast<int>(pushes_.size()); }
  // The members now, by increasing rank.
  std::vector<int> members() const;

  // Worker `worker`'s gradient for step `step`. `what` names the target in
  // errors ("'fc.weight' partition 2", "table 'emb'"). The core picks how the
  // gradient is taken, through the caller's calls:
  //   alone()                - async, ssp, and sync with one worker: apply
  //                            this gradient now. Status.
  //   gather(worker, first)  - sync: keep this gradient for the step's
  //                            average; `first`: nothing is kept yet.
  //   apply_gathered(scale)  - sync, once every worker's gradient is kept:
  //                            apply their sum times `scale` (1 / workers)
  //                            and forget it. Status.
  // A refused push (bad worker or step, or alone() failing) changes nothing.
  // The caller then answers the pulls the new clock allows (AnswerReady),
  // after its reply to the push.
  template <typename Alone, typename Gather, typename ApplyGathered>
  Status Push(int worker, int64_t step, const std::string& what, Alone&& alone, Gather&& gather,
              ApplyGathered&& apply_gathered);

  // Runs `answer` now if clock() >= min_clock, else from the AnswerReady
  // that follows the Push that gets the clock there. Pulls never answered are
  // dropped with the core.
  // Answering at once builds nothing: most pulls never wait.
  // An `answer` taking a `const std::string*` is called with null to answer
  // and with the reason to refuse, when the step the pull waits for is called
  // off (FinishWithout); one taking nothing is dropped then.
  template <typename Answer>
  void AnswerAt(int64_t min_clock, Answer&& answer) {
    if constexpr (std::is_invocable_v<Answer&, const std::string*>) {
      if (CalledOff(min_clock)) return answer(&called_off_why_);
      if (clock() >= min_clock) return answer(nullptr);
      waiting_.push_back({min_clock, std::forward<Answer>(answer)});
    } else {
      AnswerAt(min_clock,
               [plain = std::forward<Answer>(answer)](const std::string* refused) mutable {
                 if (refused == nullptr) plain();
               });
    }
  }
  // HoldSteps on: runs `answer` once step `step` is gathered whole (held,
  // or applied since), as AnswerAt runs a pull's.
  template <typename Answer>
  void AnswerHeldAt(int64_t step, Answer&& answer) {
    if (CalledOff(step + 1)) return answer(&called_off_why_);
    if (gathered_clock() > step) return answer(nullptr);
    waiting_.push_back({step + 1, std::forward<Answer>(answer), /*held=*/true});
  }
  // Answers the waiting pulls the clock allows; call after each Push.
  void AnswerReady();
  // Pulls waiting for a later clock.
  size_t waiting() const { return waiting_.size(); }
  // Sync and average: some of this step's gradients are in, not yet applied.
  bool mid_step() const { return arrived_count_ > 0; }

  int64_t clock() const;
  int64_t step() const;
  // Sync only: every gathered step is held for its clip factor (see the
  // header comment). Before the first push.
  void HoldSteps() { hold_ = mode_ == UpdateMode::kSync; }
  // A step is held: every gradient of step clock() is in.
  bool holding() const { return holding_; }
  // The members whose gradients a step averages.
  int member_count() const { return member_count_; }
  // The held step's squared norm, once its owner took it (NoteHeldNorm:
  // NormNoted() is then true until the next step is held); HeldNorm
  // answers a norm pull of step `step` with it, refused for any other step.
  bool NormNoted() const { return holding_ && norm_step_ == applied_; }
  void NoteHeldNorm(double squares) {
    norm_step_ = applied_;
    squared_norm_ = squares;
  }
  StatusOr<double> HeldNorm(int64_t step, const std::string& what) const;
  // Applies the held step `step` by its clip factor `clip`, in (0, 1]:
  // apply_gathered(scale) as Push's, with `scale` 1 / members; the caller
  // multiplies in the factor. The factor the step was applied by is taken
  // again (every worker sends it) and another one refused; so is a factor
  // when no step or another one is held.
  template <typename ApplyGathered>
  Status ApplyHeld(int64_t step, float clip, const std::string& what,
                   ApplyGathered&& apply_gathered);
  // Updates applied: steps in sync, pushes in async and ssp.
  int64_t applied() const { return applied_; }
  // Async and ssp: the pushes applied from worker `worker` (0 for a rank
  // out of range). Each worker pushes once per step from the step the
  // core started at, so this is the step its next push is of.
  int64_t pushes_of(int worker) const {
    return worker >= 0 && worker < slots() ? pushes_[static_cast<size_t>(worker)] : 0;
  }
  // Whose push the last update applied was: a worker's taken alone, or -1
  // for a step gathered from every member.
  int last_applied_worker() const { return last_applied_worker_; }
  // A backup's copy of this core (roles/server/replication.h) counts an
  // update its primary applied: worker `worker`'s alone, or (-1) a step
  // gathered from every member, exactly as Push counted it there.
  Status Replay(int worker);

  // A lost worker (see the header comment); not in mode average. Lose: the
  // last step whose gradient from `rank` this core holds or applied (-1:
  // none), and its pushes are refused from now on. In async and ssp it
  // also leaves the members at once (the ssp clock stops waiting for it;
  // the caller answers the pulls, AnswerReady), and nothing is called off:
  // the others go on to the live change that drops it.
  StatusOr<int64_t> Lose(int rank);
  // Step `last` completes without `rank` (at once, when every other
  // member's gradient is in: apply_gathered as Push's), and the steps
  // after it are called off with `why`. The core must be at step `last` or
  // `last` + 1 (Lose's answers of every core bound it so). The caller then
  // answers the pulls (AnswerReady).
  template <typename ApplyGathered>
  Status FinishWithout(int rank, int64_t last, const std::string& why,
                       ApplyGathered&& apply_gathered);
  // A step at or after `clock`'s is called off.
  bool CalledOff(int64_t min_clock) const { return called_off_ >= 0 && min_clock > called_off_; }

  // Checkpoints. Restore(applied, clock): `applied` updates, and `clock`
  // pushes from every worker (async and ssp: the checkpoint's step, where
  // every worker resumes). RestoreStep(step) is the same from step()
  // alone (tables keep only that): `step` pushes from every worker.
  void Restore(int64_t applied, int64_t clock);
  void RestoreStep(int64_t step);
  // Between steps only (mid_step() false).
  State Save() const;
  // A saved state of as many slots; the pulls waiting stay.
  Status Load(const State& state);

 private:
  enum class Take { kAlone, kGather, kGatherAndApply };
  // Checks the push and counts its arrival; says how to take it.
  StatusOr<Take> Arrive(int worker, int64_t step, const std::string& what);
  // After worker's gradient (alone, or the step's average) was applied.
  void Applied(Take take, int worker);

  struct WaitingPull {
    int64_t min_clock;
    std::function<void(const std::string* refused)> answer;  // null: answer
    bool held = false;  // waits on gathered_clock(), not clock()
  };
  // The steps gathered whole: clock(), and the held one.
  int64_t gathered_clock() const { return clock() + (holding_ ? 1 : 0); }
  // FinishWithout, but for applying: drops `rank`, and what was gathered
  // for a step after `last`. True: the step is complete, apply it.
  StatusOr<bool> DropLost(int rank, int64_t last, const std::string& why);
  // Refuses the waiting pulls of called-off steps.
  void RefuseCalledOff();

  // Makes the earliest announced change current once its step is here.
  void TakeDueChange();

  struct MemberChange {
    int64_t from_step;
    std::vector<bool> members;  // per slot
  };

  const UpdateMode mode_;
  int64_t applied_ = 0;
  std::vector<int64_t> pushes_;  // per slot: gradients applied alone (ssp's clock)
  std::vector<bool> members_;    // per slot: whose pushes count now
  int member_count_ = 0;
  std::vector<MemberChange> changes_;  // announced, by increasing step
  // async's step() at the last change, and applied_ then.
  int64_t async_base_step_ = 0;
  int64_t async_base_applied_ = 0;
  std::vector<bool> arrived_;  // sync: who has sent this step's gradient
  int arrived_count_ = 0;
  std::vector<bool> lost_;   // per slot: a lost worker's pushes are refused
  int64_t called_off_ = -1;  // steps after this one are called off (-1: none)
  std::string called_off_why_;
  std::vector<WaitingPull> waiting_;
  std::vector<WaitingPull> walking_;  // AnswerReady's: kept to reuse its memory
  int last_applied_worker_ = -1;
  bool hold_ = false;       // HoldSteps
  bool holding_ = false;    // step applied_ is gathered whole, waiting for its factor
  int64_t norm_step_ = -1;  // the step whose squared norm was last noted
  double squared_norm_ = 0;
  int64_t clipped_step_ = -1;  // the step last applied by its factor,
  float clipped_by_ = 0;       // and that factor
};

template <typename Alone, typename Gather, typename ApplyGathered>
Status UpdateCore::Push(int worker, int64_t step, const std::string& what, Alone&& alone,
                        Gather&& gather, ApplyGathered&& apply_gathered) {
  StatusOr<Take> take = Arrive(worker, step, what);
  if (!take.ok()) return take.status();
  Status st;
  switch (*take) {
    case Take::kAlone:
      st = alone();
      if (!st.ok()) return st;
      break;
    case Take::kGather:
      gather(worker, arrived_count_ == 1);
      return Status::OK();
    case Take::kGatherAndApply:
      gather(worker, arrived_count_ == 1);
      if (hold_) {
        holding_ = true;
        return Status::OK();
      }
      st = apply_gathered(1.0f / static_cast<float>(member_count_));
      break;
  }
  Applied(*take, worker);
  return st;
}

template <typename ApplyGathered>
Status UpdateCore::ApplyHeld(int64_t step, float clip, const std::string& what,
                             ApplyGathered&& apply_gathered) {
  if (!(clip > 0.0f && clip <= 1.0f))
    return InvalidArgument(
        fmt::format("a clip factor of {} for {}: expected one in (0, 1]", clip, what));
  if (step == clipped_step_) {
    if (clip == clipped_by_) return Status::OK();
    return FailedPrecondition(fmt::format(
        "a clip factor of {} for step {} of {}, which was clipped by {}: the workers disagree on "
        "the global norm",
        clip, step, what, clipped_by_));
  }
  if (!holding_ || step != applied_)
    return FailedPrecondition(fmt::format("a clip factor for step {} of {}, which {} step {}", step,
                                          what, holding_ ? "holds" : "gathers", applied_));
  holding_ = false;
  clipped_step_ = step;  // it counts as applied even if the update fails
  clipped_by_ = clip;
  Status st = apply_gathered(1.0f / static_cast<float>(member_count_));
  Applied(Take::kGatherAndApply, -1);
  return st;
}

template <typename ApplyGathered>
Status UpdateCore::FinishWithout(int rank, int64_t last, const std::string& why,
                                 ApplyGathered&& apply_gathered) {
  // A held step waits for a factor no lost worker's step can get
  // (train.clip_norm is refused with train.elastic).
  if (hold_)
    return FailedPrecondition(
        "a step held for its clip factor cannot finish without a lost worker");
  StatusOr<bool> complete = DropLost(rank, last, why);
  if (!complete.ok()) return complete.status();
  if (!*complete) return Status::OK();
  Status st = apply_gathered(1.0f / static_cast<float>(arrived_count_));
  Applied(Take::kGatherAndApply, rank);
  return st;
}

}  // namespace pstrain
