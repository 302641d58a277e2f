// The benches' wall clock: a steady clock, read in seconds.
#pragma once

#include <chrono>

namespace pstrain {

using BenchClock = std::chrono::steady_clock;

inline double SecondsSince(BenchClock::time_point since) {
  return std::chrono::duration<double>(BenchClock::now() - since).count();
}

}  // namespace pstrain
