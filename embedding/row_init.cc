#include "embedding/row_init.h"

#include <cmath>

#include "src/common/random.h"

namespace pstrain {
namespace {

// Uniform in [0, 1), 53 bits, as Rng::Uniform.
double Unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace

void InitRow(const EmbeddingTableOptions& options, int64_t id, float* out) {
  const int dim = options.dim;
  const uint64_t key = StreamSeed(options.seed, static_cast<uint64_t>(id));
  const double scale = options.init_scale;
  switch (options.init) {
    case EmbeddingInit::kZeros:
      for (int j = 0; j < dim; ++j) out[j] = 0.0f;
      return;
    case EmbeddingInit::kUniform:
      for (int j = 0; j < dim; ++j) {
        out[j] = static_cast<float>(scale * (2.0 * Unit(Mix64(key + j)) - 1.0));
      }
      return;
    case EmbeddingInit::kNormal:
      for (int j = 0; j < dim; j += 2) {
        const double u1 = 1.0 - Unit(Mix64(key + j));  // (0, 1]: log stays finite
        const double u2 = Unit(Mix64(key + j + 1));
        const double radius = scale * std::sqrt(-2.0 * std::log(u1));
        const double angle = 6.283185307179586 * u2;
        out[j] = static_cast<float>(radius * std::cos(angle));
        if (j + 1 < dim) out[j + 1] = static_cast<float>(radius * std::sin(angle));
      }
      return;
  }
}

}  // namespace pstrain
