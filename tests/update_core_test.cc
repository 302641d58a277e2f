// UpdateCore, the one update rule of dense partitions and tables: which call
// takes a push in each mode, what is refused, the clocks, and waiting pulls.
#include "roles/server/update_core.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace pstrain {
namespace {

// Records how the core took each push: "alone", "gather w first",
// "apply 0.5".
struct Recorder {
  std::vector<std::string> calls;
  // As the owners do: the push, (their reply,) then the pulls it frees.
  Status Push(UpdateCore& core, int worker, int64_t step) {
    Status st = Take(core, worker, step);
    core.AnswerReady();
    return st;
  }
  Status Take(UpdateCore& core, int worker, int64_t step) {
    return core.Push(
        worker, step, "'w' partition 0",
        [&] {
          calls.push_back("alone");
          return Status::OK();
        },
        [&](int w, bool first) {
          calls.push_back("gather " + std::to_string(w) + (first ? " first" : ""));
        },
        [&](float scale) {
          calls.push_back("apply " + std::to_string(scale).substr(0, 4));
          return Status::OK();
        });
  }
};

TEST_CASE("sync: a step is applied once, as the average, when every worker's push is in") {
  UpdateCore core(2, UpdateMode::kSync);
  Recorder r;
  std::vector<int64_t> answered;
  core.AnswerAt(1, [&] { answered.push_back(1); });
  core.AnswerAt(0, [&] { answered.push_back(0); });  // at once
  CHECK(answered == std::vector<int64_t>{0});
  REQUIRE(r.Push(core, 1, 0).ok());
  CHECK(core.clock() == 0);
  CHECK(answered.size() == 1);
  REQUIRE(r.Push(core, 0, 0).ok());
  CHECK(r.calls == std::vector<std::string>{"gather 1 first", "gather 0", "apply 0.50"});
  CHECK(core.clock() == 1);
  CHECK(core.step() == 1);
  CHECK(answered == std::vector<int64_t>{0, 1});
}

TEST_CASE("sync: a push for another step, or a second push of a step, is refused") {
  UpdateCore core(2, UpdateMode::kSync);
  Recorder r;
  Status ahead = r.Push(core, 0, 1);
  CHECK(ahead.message() == "worker 0 pushed step 1 to 'w' partition 0, which is at step 0");
  REQUIRE(r.Push(core, 0, 0).ok());
  Status twice = r.Push(core, 0, 0);
  CHECK(twice.message() == "worker 0 pushed step 0 to 'w' partition 0 twice");
  Status stranger = r.Push(core, 2, 0);
  CHECK(stranger.message() == "push to 'w' partition 0 from worker 2: the job has 2 workers");
  CHECK(r.calls == std::vector<std::string>{"gather 0 first"});
  CHECK(core.clock() == 0);
}

TEST_CASE("sync with one worker applies each push alone, with no copy kept") {
  UpdateCore core(1, UpdateMode::kSync);
  Recorder r;
  REQUIRE(r.Push(core, 0, 0).ok());
  REQUIRE(r.Push(core, 0, 1).ok());
  CHECK(r.calls == std::vector<std::string>{"alone", "alone"});
  CHECK(core.clock() == 2);
}

TEST_CASE("clip: a gathered step is held until its factor; norm waits answer at the hold") {
  for (int workers : {1, 2}) {
    CAPTURE(workers);
    UpdateCore core(workers, UpdateMode::kSync);
    core.HoldSteps();
    Recorder r;
    std::vector<std::string> answered;
    core.AnswerAt(1, [&] { answered.push_back("pull"); });
    core.AnswerHeldAt(0, [&](const std::string*) { answered.push_back("norm"); });
    for (int w = 0; w < workers; ++w) REQUIRE(r.Push(core, w, 0).ok());
    // Every gradient is in: held, not applied; the norm is answered, the pull waits.
    CHECK(core.holding());
    CHECK(core.mid_step());
    CHECK(core.clock() == 0);
    CHECK(answered == std::vector<std::string>{"norm"});
    CHECK(r.calls.back() ==
          "gather " + std::to_string(workers - 1) + (workers == 1 ? " first" : ""));
    Status early = core.ApplyHeld(1, 1.0f, "'w' partition 0", [](float) { return Status::OK(); });
    CHECK(early.message() == "a clip factor for step 1 of 'w' partition 0, which holds step 0");
    float scale = 0;
    REQUIRE(core.ApplyHeld(0, 1.0f, "'w' partition 0",
                           [&](float s) {
                             scale = s;
                             return Status::OK();
                           })
                .ok());
    core.AnswerReady();
    CHECK(scale == 1.0f / static_cast<float>(workers));
    CHECK_FALSE(core.holding());
    CHECK(core.clock() == 1);
    CHECK(answered == std::vector<std::string>{"norm", "pull"});
    // A norm asked after the step was applied is answered at once.
    core.AnswerHeldAt(0, [&](const std::string*) { answered.push_back("late norm"); });
    CHECK(answered.back() == "late norm");
    Status none = core.ApplyHeld(1, 1.0f, "'w' partition 0", [](float) { return Status::OK(); });
    CHECK(none.message() == "a clip factor for step 1 of 'w' partition 0, which gathers step 1");
  }
}

TEST_CASE("ssp: the clock is the slowest worker's pushes; pulls wait for it") {
  UpdateCore core(3, UpdateMode::kSsp);
  Recorder r;
  bool answered = false;
  core.AnswerAt(1, [&] { answered = true; });
  for (int step = 0; step < 5; ++step) REQUIRE(r.Push(core, 0, step).ok());
  REQUIRE(r.Push(core, 1, 0).ok());
  // 6 pushes from 3 workers: the average worker is at 2, the slowest at 0.
  CHECK(core.clock() == 0);
  CHECK_FALSE(answered);
  REQUIRE(r.Push(core, 2, 0).ok());
  CHECK(core.clock() == 1);
  CHECK(answered);
  CHECK(core.applied() == 7);
}

TEST_CASE("async: every push is applied; step() is pushes per worker") {
  UpdateCore core(2, UpdateMode::kAsync);
  Recorder r;
  for (int i = 0; i < 5; ++i) REQUIRE(r.Push(core, i % 2, 0).ok());
  CHECK(r.calls.size() == 5);
  CHECK(core.clock() == 5);
  CHECK(core.step() == 2);
}

TEST_CASE("a push whose update fails changes no count") {
  UpdateCore core(2, UpdateMode::kAsync);
  Status st = core.Push(
      0, 0, "table 'emb'", [] { return InvalidArgument("bad row"); }, [](int, bool) {},
      [](float) { return Status::OK(); });
  CHECK(st.message() == "bad row");
  CHECK(core.applied() == 0);
}

TEST_CASE("restore: the clock and step of a checkpoint come back in every mode") {
  for (UpdateMode mode : {UpdateMode::kSync, UpdateMode::kAsync, UpdateMode::kSsp}) {
    UpdateCore core(4, mode);
    core.RestoreStep(7);
    CHECK(core.step() == 7);
    CHECK(core.clock() == (mode == UpdateMode::kAsync ? 28 : 7));
  }
}

// Elastic jobs: the members change at an agreed step boundary.
TEST_CASE("sync: from the change's step, a step waits for the new members and averages over them") {
  UpdateCore core(4, 2, UpdateMode::kSync);  // 4 slots, workers 0 and 1 members
  Recorder r;
  CHECK(core.members() == std::vector<int>{0, 1});
  CHECK(r.Push(core, 2, 0).message() ==
        "push to 'w' partition 0 from worker 2: it is not a member of the job at step 0");
  // Worker 2 joins from step 1: step 0 is still the old pair's.
  REQUIRE(core.ChangeMembers(1, {0, 1, 2}).ok());
  CHECK(core.members() == std::vector<int>{0, 1});
  REQUIRE(r.Push(core, 0, 0).ok());
  REQUIRE(r.Push(core, 1, 0).ok());
  CHECK(core.members() == std::vector<int>{0, 1, 2});
  REQUIRE(r.Push(core, 2, 1).ok());
  REQUIRE(r.Push(core, 0, 1).ok());
  CHECK(core.clock() == 1);  // waits for worker 1 too
  REQUIRE(r.Push(core, 1, 1).ok());
  CHECK(core.clock() == 2);
  // Worker 0 leaves from step 2: two members again.
  REQUIRE(core.ChangeMembers(2, {1, 2}).ok());
  CHECK(r.Push(core, 0, 2).message() ==
        "push to 'w' partition 0 from worker 0: it is not a member of the job at step 2");
  REQUIRE(r.Push(core, 2, 2).ok());
  REQUIRE(r.Push(core, 1, 2).ok());
  CHECK(r.calls == std::vector<std::string>{"gather 0 first", "gather 1", "apply 0.50",
                                            "gather 2 first", "gather 0", "gather 1", "apply 0.33",
                                            "gather 2 first", "gather 1", "apply 0.50"});
  CHECK(core.clock() == 3);
}

TEST_CASE("a change of members is refused for a step under way or past, or a bad set") {
  UpdateCore core(3, 2, UpdateMode::kSync);
  Recorder r;
  REQUIRE(r.Push(core, 0, 0).ok());
  CHECK(core.ChangeMembers(0, {0}).message() ==
        "a change of members from step 0: the job is at step 0, whose pushes have begun");
  REQUIRE(r.Push(core, 1, 0).ok());
  CHECK(core.ChangeMembers(0, {0}).message() ==
        "a change of members from step 0: the job is at step 1");
  CHECK(core.ChangeMembers(5, {}).message() == "a change of members leaves no worker");
  CHECK(core.ChangeMembers(5, {3}).message() == "member rank 3 is not in 0..2");
  CHECK(core.ChangeMembers(5, {1, 1}).message() == "member rank 1 is named twice");
  REQUIRE(core.ChangeMembers(5, {0, 1, 2}).ok());
  CHECK(core.ChangeMembers(4, {0}).message() ==
        "a change of members from step 4 after one from step 5");
  CHECK(core.members() == std::vector<int>{0, 1});  // nothing refused took effect
}

TEST_CASE("ssp: a joining worker starts at the clock, a leaving one stops holding it back") {
  UpdateCore core(3, 2, UpdateMode::kSsp);
  Recorder r;
  for (int step = 0; step < 4; ++step) REQUIRE(r.Push(core, 0, step).ok());
  REQUIRE(r.Push(core, 1, 0).ok());
  REQUIRE(r.Push(core, 1, 1).ok());
  CHECK(core.clock() == 2);
  REQUIRE(core.ChangeMembers(2, {0, 1, 2}).ok());  // due now: worker 2 starts at 2
  CHECK(core.clock() == 2);
  REQUIRE(r.Push(core, 2, 2).ok());
  CHECK(core.clock() == 2);  // worker 1 is the slowest
  bool answered = false;
  core.AnswerAt(4, [&] { answered = true; });
  REQUIRE(core.ChangeMembers(2, {0, 2}).ok());  // worker 1 leaves
  CHECK(core.clock() == 3);
  REQUIRE(r.Push(core, 2, 3).ok());
  CHECK(core.clock() == 4);
  CHECK(answered);
}

TEST_CASE("async: step() keeps the steps counted before a change at the old member count") {
  UpdateCore core(4, 2, UpdateMode::kAsync);
  Recorder r;
  for (int i = 0; i < 8; ++i) REQUIRE(r.Push(core, i % 2, 0).ok());
  CHECK(core.step() == 4);
  REQUIRE(core.ChangeMembers(4, {0, 1, 2, 3}).ok());
  for (int i = 0; i < 8; ++i) REQUIRE(r.Push(core, i % 4, 0).ok());
  CHECK(core.step() == 6);  // 4 + 8 pushes of 4 workers
}

// FinishWithout, as the owners call it, recording the apply.
Status Finish(UpdateCore& core, Recorder& r, int rank, int64_t last) {
  Status st = core.FinishWithout(rank, last, "worker lost", [&](float scale) {
    r.calls.push_back("apply " + std::to_string(scale).substr(0, 4));
    return Status::OK();
  });
  core.AnswerReady();
  return st;
}

TEST_CASE(
    "lost worker: a step without its gradient completes over the others, the next is called off") {
  UpdateCore core(3, UpdateMode::kSync);
  Recorder r;
  REQUIRE(r.Push(core, 0, 0).ok());
  auto last = core.Lose(2);
  REQUIRE(last.ok());
  CHECK(*last == -1);                    // its gradient of step 0 never came
  CHECK_FALSE(r.Push(core, 2, 0).ok());  // a late push of the lost worker
  bool answered = false;
  std::string refused;
  core.AnswerAt(1, [&] { answered = true; });
  core.AnswerAt(2, [&](const std::string* why) {
    if (why == nullptr)
      FAIL("a pull of a called-off step was answered");
    else
      refused = *why;
  });
  REQUIRE(Finish(core, r, 2, 0).ok());
  CHECK(refused == "worker lost");
  CHECK_FALSE(answered);  // worker 1's gradient is still to come
  REQUIRE(r.Push(core, 1, 0).ok());
  CHECK(r.calls ==
        std::vector<std::string>{"gather 0 first", "gather 1", "apply 0.50"});  // over two
  CHECK(answered);
  CHECK(core.clock() == 1);
  Status next = r.Push(core, 0, 1);
  CHECK(next.code() == StatusCode::kCancelled);
  refused.clear();
  core.AnswerAt(2, [&](const std::string* why) {
    if (why == nullptr)
      FAIL("answered");
    else
      refused = *why;
  });
  CHECK(refused == "worker lost");
}

TEST_CASE("lost worker: its gradient counts where it came; the others complete the step at once") {
  UpdateCore core(3, UpdateMode::kSync);
  Recorder r;
  REQUIRE(r.Push(core, 2, 0).ok());
  REQUIRE(r.Push(core, 0, 0).ok());
  auto last = core.Lose(2);
  REQUIRE(last.ok());
  CHECK(*last == 0);
  REQUIRE(Finish(core, r, 2, 0).ok());
  CHECK(core.clock() == 0);  // worker 1's is still to come, and the divisor is 3
  REQUIRE(r.Push(core, 1, 0).ok());
  CHECK(r.calls.back() == "apply 0.33");
  // Without its gradient, the last missing one completes the step in FinishWithout.
  UpdateCore other(3, UpdateMode::kSync);
  Recorder o;
  REQUIRE(o.Push(other, 0, 0).ok());
  REQUIRE(o.Push(other, 1, 0).ok());
  REQUIRE(other.Lose(2).ok());
  REQUIRE(Finish(other, o, 2, 0).ok());
  CHECK(o.calls.back() == "apply 0.50");
  CHECK(other.clock() == 1);
}

TEST_CASE("lost worker: a core past the lost step drops what it gathered of the next") {
  UpdateCore core(2, UpdateMode::kSync);
  Recorder r;
  REQUIRE(r.Push(core, 0, 0).ok());
  REQUIRE(r.Push(core, 1, 0).ok());
  REQUIRE(r.Push(core, 0, 1).ok());  // gathered, waits for worker 1
  auto last = core.Lose(1);
  REQUIRE(last.ok());
  CHECK(*last == 0);
  REQUIRE(Finish(core, r, 1, 0).ok());
  CHECK(core.clock() == 1);
  CHECK_FALSE(core.mid_step());
  CHECK_FALSE(Finish(core, r, 1, 5).ok());  // a step this core is not at
  UpdateCore average(2, UpdateMode::kAverage);
  CHECK_FALSE(average.Lose(1).ok());
}

TEST_CASE("lost worker, ssp: it leaves the clock at once; the pulls it held back are answered") {
  UpdateCore core(3, UpdateMode::kSsp);
  Recorder r;
  for (int step = 0; step < 3; ++step)
    for (int w : {0, 1}) REQUIRE(r.Push(core, w, step).ok());
  REQUIRE(r.Push(core, 2, 0).ok());
  CHECK(core.clock() == 1);  // worker 2 is the slowest
  bool answered = false;
  core.AnswerAt(3, [&] { answered = true; });
  auto last = core.Lose(2);
  REQUIRE(last.ok());
  CHECK(*last == 0);  // its one push, of step 0
  CHECK(core.clock() == 3);
  core.AnswerReady();
  CHECK(answered);
  CHECK_FALSE(r.Push(core, 2, 1).ok());  // a late push of the lost worker
  CHECK(core.members() == std::vector<int>{0, 1});
  // The live change drops it: the two others go on as they were.
  REQUIRE(core.Renumber(3, {0, 1, -1}, 2).ok());
  CHECK(core.clock() == 3);
  REQUIRE(r.Push(core, 1, 3).ok());
}

TEST_CASE("lost worker, async: its last step is its pushes less one; step() goes on from there") {
  UpdateCore core(2, UpdateMode::kAsync);
  Recorder r;
  for (int step = 0; step < 4; ++step) REQUIRE(r.Push(core, 0, step).ok());
  for (int step = 0; step < 2; ++step) REQUIRE(r.Push(core, 1, step).ok());
  CHECK(core.step() == 3);  // 6 pushes over 2 workers
  auto last = core.Lose(1);
  REQUIRE(last.ok());
  CHECK(*last == 1);
  CHECK_FALSE(r.Push(core, 1, 2).ok());
  REQUIRE(r.Push(core, 0, 4).ok());
  CHECK(core.step() == 4);  // one worker now: each push a step
  // Restored from the checkpoint of step 1000 (3 workers, 3000 pushes):
  // each worker's pushes count from the step it resumes at.
  UpdateCore restored(3, UpdateMode::kAsync);
  restored.Restore(3000, 1000);
  CHECK(restored.step() == 1000);
  for (int step = 1000; step < 1010; ++step) REQUIRE(r.Push(restored, 2, step).ok());
  auto since = restored.Lose(2);
  REQUIRE(since.ok());
  CHECK(*since == 1009);
  UpdateCore alone(2, UpdateMode::kAsync);
  REQUIRE(alone.Lose(1).ok());
  CHECK_FALSE(alone.Lose(0).ok());  // the last member
  // A joiner's pushes count from the step it joins at.
  UpdateCore grown(1, UpdateMode::kAsync);
  Recorder g;
  for (int step = 0; step < 5; ++step) REQUIRE(g.Push(grown, 0, step).ok());
  REQUIRE(grown.Renumber(5, {0}, 2).ok());
  REQUIRE(g.Push(grown, 1, 5).ok());
  auto joiner = grown.Lose(1);
  REQUIRE(joiner.ok());
  CHECK(*joiner == 5);
}

TEST_CASE("renumber: the stayers take their new ranks, a joiner is a member, the divisor follows") {
  UpdateCore core(3, UpdateMode::kSync);
  Recorder r;
  for (int w = 0; w < 3; ++w) REQUIRE(r.Push(core, w, 0).ok());
  // Worker 1 leaves, worker 2 becomes 1, and a joiner takes rank 2.
  REQUIRE(core.Renumber(1, {0, -1, 1}, 3).ok());
  r.calls.clear();
  for (int w : {2, 1, 0}) REQUIRE(r.Push(core, w, 1).ok());
  CHECK(r.calls ==
        std::vector<std::string>{"gather 2 first", "gather 1", "gather 0", "apply 0.33"});
  // Down to two: rank 3 does not exist, the divisor is 2.
  REQUIRE(core.Renumber(2, {0, 1, -1}, 2).ok());
  CHECK_FALSE(r.Push(core, 2, 2).ok());
  r.calls.clear();
  REQUIRE(r.Push(core, 1, 2).ok());
  REQUIRE(r.Push(core, 0, 2).ok());
  CHECK(r.calls.back() == "apply 0.50");
  CHECK(core.clock() == 3);
}

TEST_CASE(
    "renumber: only between steps, at the core's step; a lost worker's call-off is forgotten") {
  UpdateCore core(2, UpdateMode::kSync);
  Recorder r;
  REQUIRE(r.Push(core, 0, 0).ok());
  CHECK_FALSE(core.Renumber(0, {0, 1}, 2).ok());  // worker 1's push of step 0 is to come
  REQUIRE(r.Push(core, 1, 0).ok());
  CHECK_FALSE(core.Renumber(0, {0, 1}, 2).ok());  // not the core's step
  CHECK_FALSE(core.Renumber(1, {0}, 2).ok());     // a rank for each worker of today
  // Worker 1 lost while step 1 is under way: step 1 finishes without it, 2 is called off.
  REQUIRE(r.Push(core, 0, 1).ok());
  REQUIRE(core.Lose(1).ok());
  REQUIRE(Finish(core, r, 1, 1).ok());
  CHECK(core.clock() == 2);
  CHECK(r.Push(core, 0, 2).code() == StatusCode::kCancelled);
  REQUIRE(core.Renumber(2, {0, -1}, 1).ok());
  REQUIRE(r.Push(core, 0, 2).ok());  // alone now
  CHECK(core.clock() == 3);
  // ssp: a joiner's clock starts where the job is.
  UpdateCore ssp(1, UpdateMode::kSsp);
  Recorder s;
  for (int step = 0; step < 3; ++step) REQUIRE(s.Push(ssp, 0, step).ok());
  REQUIRE(ssp.Renumber(3, {0}, 2).ok());
  CHECK(ssp.clock() == 3);
}

}  // namespace
}  // namespace pstrain
