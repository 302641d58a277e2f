// BackgroundCall (embedding/background_call.h): a call runs on another
// thread, its Status comes back from Wait, calls run one after another on
// the same thread, and destroying the object waits for a call in flight.
#include "embedding/background_call.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace pstrain {
namespace {

TEST_CASE("a started call runs on another thread and Wait returns its status") {
  BackgroundCall call;
  CHECK(call.Wait().ok());  // nothing started
  std::thread::id ran_on;
  call.Start([&] {
    ran_on = std::this_thread::get_id();
    return Unavailable("disk full");
  });
  CHECK(call.busy());
  const Status st = call.Wait();
  CHECK_FALSE(call.busy());
  CHECK(st.message() == "disk full");
  CHECK((ran_on != std::this_thread::get_id()));
  CHECK(call.Wait().ok());  // a status is returned once
}

TEST_CASE("calls run in order on one thread, kept between calls") {
  BackgroundCall call;
  std::thread::id first;
  int runs = 0;
  bool same_thread = true;
  for (int i = 0; i < 100; ++i) {
    call.Start([&, i] {
      if (i == 0) first = std::this_thread::get_id();
      same_thread = same_thread && first == std::this_thread::get_id();
      ++runs;  // the owner reads it only after Wait
      return Status::OK();
    });
    REQUIRE(call.Wait().ok());
    CHECK(runs == i + 1);
  }
  CHECK(same_thread);
}

TEST_CASE("destroying it waits for the call in flight") {
  std::atomic<bool> done{false};
  {
    BackgroundCall call;
    call.Start([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      done = true;
      return Status::OK();
    });
  }
  CHECK(done);
}

}  // namespace
}  // namespace pstrain
