// Tensor: a dense float32 array with a shape, row-major (the batch first:
// [N, C, H, W] for images, [N, F] for features). Plain data; the owner
// decides who may touch it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <numeric>
#include <vector>

#include "src/common/tensor_memory.h"

namespace pstrain {

using Shape = std::vector<int64_t>;

inline int64_t NumElements(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

struct Tensor {
  Shape shape;
  FloatBuffer data;

  Tensor() = default;
  explicit Tensor(Shape s) : shape(std::move(s)), data(static_cast<size_t>(NumElements(shape))) {}

  int64_t size() const { return static_cast<int64_t>(data.size()); }
  int64_t dim(size_t i) const { return shape[i]; }
  float* ptr() { return data.data(); }
  const float* ptr() const { return data.data(); }
  // Reshapes, keeping the allocation when it is large enough (no zeroing
  // of kept elements: callers overwrite).
  void Resize(Shape s) {
    shape = std::move(s);
    data.resize(static_cast<size_t>(NumElements(shape)));
  }
};

}  // namespace pstrain
