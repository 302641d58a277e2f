#include "src/nn/init.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <random>

#include "src/common/random.h"

namespace pstrain {
namespace {

// Uniform in [0, 1) from the engine (mt19937_64's sequence is fixed by the
// standard, unlike the distributions').
double Unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

void FillUniform(std::mt19937_64& rng, float bound, Tensor* t) {
  for (float& v : t->data) v = static_cast<float>((2.0 * Unit(rng) - 1.0) * bound);
}

// Box-Muller, one value per pair of draws (simple; initialization is not hot).
void FillNormal(std::mt19937_64& rng, float stddev, Tensor* t) {
  constexpr double kTwoPi = 6.283185307179586;
  for (float& v : t->data) {
    const double u1 = 1.0 - Unit(rng);  // (0, 1]: log is finite
    const double u2 = Unit(rng);
    v = static_cast<float>(stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2));
  }
}

}  // namespace

bool IsKnownInit(const std::string& scheme) {
  return scheme == "xavier" || scheme == "he" || scheme == "normal" || scheme == "uniform" ||
         scheme == "zeros";
}

void InitWeight(const std::string& scheme, float scale, int64_t fan_in, int64_t fan_out,
                uint64_t seed, Param* param) {
  assert(IsKnownInit(scheme));
  std::mt19937_64 rng(StreamKey(seed, param->name));
  Tensor* t = &param->value;
  if (scheme == "xavier") {
    FillUniform(rng, std::sqrt(6.0f / static_cast<float>(fan_in + fan_out)), t);
  } else if (scheme == "he") {
    FillNormal(rng, std::sqrt(2.0f / static_cast<float>(fan_in)), t);
  } else if (scheme == "normal") {
    FillNormal(rng, scale, t);
  } else if (scheme == "uniform") {
    FillUniform(rng, scale, t);
  } else {
    std::fill(t->data.begin(), t->data.end(), 0.0f);
  }
}

}  // namespace pstrain
