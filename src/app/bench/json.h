// The benches' output: one JSON object per line on stdout (docs/formats.md,
// "Benchmark output"), built with nlohmann-json so every string is escaped (a config
// path may hold quotes, backslashes or newlines).
#pragma once

#include <nlohmann/json.hpp>

namespace pstrain {

using Json = nlohmann::ordered_json;  // keys in the order written, as before

// Prints `line` on one line of stdout and flushes it (a reader may follow
// the bench while it runs).
void PrintJsonLine(const Json& line);

// `value` rounded to `decimals` places: the precision a measurement means
// (JSON would otherwise print every digit of a double).
double Rounded(double value, int decimals);

}  // namespace pstrain
