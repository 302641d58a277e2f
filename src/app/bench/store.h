// bench embedding --cases store (bench_store.cc has what it measures).
#pragma once

#include <vector>

#include "src/app/bench/tiered.h"
#include "src/common/status.h"

namespace pstrain {

// Rows: options.ids; the store under options.store_dir.
Status RunStoreBench(const std::vector<int>& dims, const TieredBenchOptions& options);

}  // namespace pstrain
