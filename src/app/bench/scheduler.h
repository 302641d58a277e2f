// `pstrain bench scheduler`: a real scheduler in its own process against
// many simulated nodes (src/app/bench/sim_nodes.h); docs/benchmarks.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/status.h"

namespace pstrain {

struct SchedulerBenchOptions {
  std::vector<int> nodes = {1000};  // one case per count: servers and workers together
  int servers_every = 8;            // one server per this many nodes (at least one)
  int loops = 4;                    // threads the simulated nodes run on
  int window = 1024;                // connects and registrations in flight
  int heartbeats = 10;              // per node, before the barrier
  double timeout_s = 120;           // per phase of a case
  int64_t memory_mb = 4096;         // the scheduler's RLIMIT_DATA
  // After the heartbeats: one worker lost and replaced by a new node, and
  // the Topology bytes of that recovery (SimNodes::Recover).
  bool recover = false;
  // The pstrain executable the scheduler runs (empty: this one): another
  // build's, to compare the two side by side.
  std::string scheduler_bin;
};

// One JSON line per case (docs/formats.md, "Benchmark output").
Status RunSchedulerBench(const SchedulerBenchOptions& options);

}  // namespace pstrain
