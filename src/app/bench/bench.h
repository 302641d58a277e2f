// `pstrain bench <case>`: benchmarks that print one JSON object per line on
// stdout (the contract in docs/formats.md, "Benchmark output"). Benchmarks measure; the tests
// assert.
#pragma once

#include <string>
#include <vector>

namespace pstrain {

// Runs `pstrain bench ...` (args exclude "bench"); returns the exit status.
int RunBench(const std::vector<std::string>& args);

}  // namespace pstrain
