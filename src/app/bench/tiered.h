// bench embedding --cases tiered (bench_tiered.cc has what it measures).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/status.h"

namespace pstrain {

struct TieredBenchOptions {
  std::string store_dir;  // parent of the store's scratch directory; "": $TMPDIR or /tmp
  int64_t ids = 1000000;  // Zipf ranks
  int rounds = 200;       // requests; the second half is timed
};

Status RunTieredBench(const std::vector<int>& dims, const TieredBenchOptions& options);

}  // namespace pstrain
