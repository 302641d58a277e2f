// bench embedding --cases move: what moving table rows between servers
// costs on one server's side (roles/server/table_moves.h), moves.cc says how.
#pragma once

#include <vector>

#include "src/app/bench/tiered.h"
#include "src/common/status.h"

namespace pstrain {

Status RunMoveBench(const std::vector<int>& dims, const TieredBenchOptions& options);

}  // namespace pstrain
