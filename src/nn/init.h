// Weight initializers. Each parameter draws from its own stream, keyed by the
// build seed and the parameter's name, so every worker computes the same
// initial weights whatever order the layers are built in.
#pragma once

#include <cstdint>
#include <string>

#include "src/nn/layer.h"

namespace pstrain {

// xavier | he | normal | uniform | zeros.
bool IsKnownInit(const std::string& scheme);

// Fills param->value (its shape already set):
//   xavier:  uniform in +-sqrt(6 / (fan_in + fan_out))
//   he:      normal, std sqrt(2 / fan_in)
//   normal:  normal, std `scale`
//   uniform: uniform in +-`scale`
//   zeros:   0
// fan_in/fan_out as PyTorch computes them: for a weight [out, in, k...],
// in * k... and out * k...
void InitWeight(const std::string& scheme, float scale, int64_t fan_in, int64_t fan_out,
                uint64_t seed, Param* param);

}  // namespace pstrain
