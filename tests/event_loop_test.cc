// The loop-thread check (PSTRAIN_DCHECK_ON_LOOP, comm/transport/event_loop.h):
// a loop-only call from another thread while the loop runs is caught and
// named; calls on the loop thread, and any call while no loop thread runs
// (before Start(), after Stop()), pass.
//
// The check compiles to nothing where NDEBUG is defined (the Release build
// the tests run in), so this file turns it on for itself; the failure
// handler is swapped for one that records the line instead of aborting.
#undef NDEBUG

#include "comm/transport/event_loop.h"

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

namespace pstrain {
namespace {

std::vector<std::string> failures;  // lines of the failed checks, main thread's and loop's

void RecordFailure(const std::string& line) { failures.push_back(line); }

// A loop-only function, as Connection's and the Scheduler's begin.
void LoopOnlyStep(EventLoop* loop) { PSTRAIN_DCHECK_ON_LOOP(loop); }

struct RecordedFailures {
  RecordedFailures() : previous(EventLoop::SetLoopCheckHandlerForTest(&RecordFailure)) {
    failures.clear();
  }
  ~RecordedFailures() { EventLoop::SetLoopCheckHandlerForTest(previous); }
  EventLoop::LoopCheckHandler previous;
};

TEST_CASE("a loop-only call from another thread while the loop runs fails the check, naming it") {
  RecordedFailures recorded;
  EventLoop loop;
  REQUIRE(loop.Start().ok());
  // Until the loop thread has begun, nobody else runs loop callbacks yet.
  REQUIRE(loop.Call<bool>([] { return true; }, false));

  LoopOnlyStep(&loop);
  REQUIRE(failures.size() == 1);
  CHECK(failures[0].find("LoopOnlyStep") != std::string::npos);
  CHECK(failures[0].find("event_loop_test.cc") != std::string::npos);
  CHECK(failures[0].find("is loop-thread only") != std::string::npos);
  CHECK(!loop.MayTouchLoopState());

  // Another thread than the test's main thread is caught as well.
  std::thread other([&] { LoopOnlyStep(&loop); });
  other.join();
  CHECK(failures.size() == 2);
  REQUIRE(loop.Stop().ok());
}

TEST_CASE("loop-only calls on the loop thread pass the check") {
  RecordedFailures recorded;
  EventLoop loop;
  REQUIRE(loop.Start().ok());
  const bool allowed = loop.Call<bool>(
      [&] {
        LoopOnlyStep(&loop);
        return loop.MayTouchLoopState();
      },
      false);
  CHECK(allowed);
  REQUIRE(loop.Stop().ok());
  CHECK(failures.empty());
}

TEST_CASE("while no loop thread runs, its owner may touch loop state") {
  RecordedFailures recorded;
  EventLoop never_started;
  CHECK(never_started.MayTouchLoopState());
  LoopOnlyStep(&never_started);

  EventLoop stopped;
  CHECK(stopped.MayTouchLoopState());  // before Start(): configuring it
  REQUIRE(stopped.Start().ok());
  REQUIRE(stopped.Call<bool>([] { return true; }, false));
  REQUIRE(stopped.Stop().ok());
  CHECK(stopped.MayTouchLoopState());  // after Stop(): tearing down
  LoopOnlyStep(&stopped);
  CHECK(failures.empty());
  // A call to a loop that stopped returns what it is given for that, at
  // once: it must not wait for a closure the loop will never run.
  CHECK(stopped.Call<int>([] { return 1; }, 7) == 7);
}

}  // namespace
}  // namespace pstrain
