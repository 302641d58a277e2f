// Helpers of the collective suites: every rank of a ring as a thread.
#pragma once

#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "src/common/status.h"

namespace pstrain::testing {

// Runs `body(rank)` on one thread per rank and returns each rank's status.
template <typename Body>
std::vector<Status> OnEveryRank(int world, Body body) {
  std::vector<Status> results(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { results[r] = body(r); });
  for (auto& t : threads) t.join();
  return results;
}

inline void RequireAllOk(const std::vector<Status>& results) {
  for (const Status& st : results) REQUIRE_MESSAGE(st.ok(), st.message());
}

}  // namespace pstrain::testing
