#include "src/app/bench/json.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace pstrain {

void PrintJsonLine(const Json& line) {
  // Invalid UTF-8 (a path's bytes) is replaced, not thrown on.
  const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

double Rounded(double value, int decimals) {
  if (!std::isfinite(value)) return value;  // dumped as null
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

}  // namespace pstrain
