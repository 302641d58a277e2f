// RequestFence (roles/server/request_fence.h): a replicated job's server
// holds the workers' requests while it cannot tell whether the scheduler
// still counts it in, serves them in order once it can, and never serves
// them if it cannot; and StallWatch::Overdue, which tells a server that
// woke from a stall before its heartbeat check has run.
#include "roles/server/request_fence.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "roles/node/stall_watch.h"

namespace pstrain {
namespace {

struct Fenced {
  EventLoop loop;
  std::atomic<bool> counted_in{false};
  std::vector<uint64_t> served;  // request ids, loop thread
  std::unique_ptr<RequestFence> fence;

  explicit Fenced(uint64_t patience_ms) {
    REQUIRE(loop.Start().ok());
    fence = std::make_unique<RequestFence>(
        &loop, [this] { return counted_in.load(); },
        [this](const Connection::Ptr&, Incoming&& in) { served.push_back(in.message.request_id); },
        patience_ms);
  }
  ~Fenced() {
    loop.Call<bool>(
        [this] {
          fence.reset();
          return true;
        },
        false);
    loop.Stop().IgnoreError();
  }
  // A pull, id `id`: whether it must wait (else the caller serves it).
  bool Hold(uint64_t id) {
    return loop.Call<bool>(
        [this, id] {
          Incoming in;
          in.message.request_id = id;
          in.message.body = PullRequest{"w", 0, 0, 0, 4};
          if (fence->Hold(nullptr, in)) return true;
          served.push_back(id);
          return false;
        },
        false);
  }
  size_t Waiting() {
    return loop.Call<size_t>([this] { return fence->waiting(); }, 0);
  }
  std::vector<uint64_t> Served() {
    return loop.Call<std::vector<uint64_t>>([this] { return served; }, {});
  }
  // Polls (up to 10 s) until nothing waits.
  bool Drained() {
    for (int i = 0; i < 1000 && Waiting() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return Waiting() == 0;
  }
};

TEST_CASE("a server counted in serves each request at once") {
  Fenced f(10000);
  f.counted_in = true;
  CHECK_FALSE(f.Hold(1));
  CHECK_FALSE(f.Hold(2));
  CHECK(f.Waiting() == 0);
  CHECK(f.Served() == std::vector<uint64_t>{1, 2});
}

TEST_CASE("requests wait while the server may be counted lost, then are served in order") {
  Fenced f(10000);
  CHECK(f.Hold(1));
  CHECK(f.Hold(2));
  CHECK(f.Served().empty());
  f.counted_in = true;
  // One that comes before the fence looked again waits behind the others.
  const bool third_waits = f.Hold(3);
  REQUIRE(f.Drained());
  CHECK(f.Served() == std::vector<uint64_t>{1, 2, 3});
  if (!third_waits) MESSAGE("the fence looked again before the third request came");
}

TEST_CASE("requests never served are dropped after the patience, their links closed") {
  Fenced f(50);
  CHECK(f.Hold(1));
  CHECK(f.Hold(2));
  REQUIRE(f.Drained());
  CHECK(f.Served().empty());
  CHECK(f.loop.Call<uint64_t>([&f] { return f.fence->dropped(); }, 0) == 2);
  // Counted in again later: what comes next is served at once.
  f.counted_in = true;
  CHECK_FALSE(f.Hold(3));
}

TEST_CASE("the end of the server's part drops what waits") {
  Fenced f(10000);
  CHECK(f.Hold(1));
  f.loop.Call<bool>(
      [&f] {
        f.fence->Drop(Aborted("the job is over"));
        return true;
      },
      false);
  CHECK(f.Waiting() == 0);
  f.counted_in = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(f.Served().empty());
}

TEST_CASE("StallWatch::Overdue: a check late by more than half the timeout, before it runs") {
  StallWatch watch;
  CHECK_FALSE(watch.Overdue(5000, 1000, 3000));  // no check yet
  CHECK(watch.Check(1000, 1000, 3000) == 0);
  CHECK_FALSE(watch.Overdue(2000, 1000, 3000));  // due now
  CHECK_FALSE(watch.Overdue(3500, 1000, 3000));  // late by 1.5 s: half the timeout
  CHECK(watch.Overdue(3501, 1000, 3000));
  CHECK(watch.Check(3501, 1000, 3000) == 1501);  // and Check says the same
  CHECK_FALSE(watch.Overdue(3600, 1000, 3000));
}

}  // namespace
}  // namespace pstrain
