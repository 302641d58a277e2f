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

namespace pstrain {

using Shape = std::vector<int64_t>;

inline int64_t NumElements(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// Memory for tensors starts on a 64-byte boundary. Eigen's vectorized sums
// (bias gradients, reductions) peel scalar elements until the first aligned
// one, so the order of additions, and the float result, would otherwise
// depend on where malloc happened to put the array: the same run could give
// different weights from one process to the next.
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlignment); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const {
    return false;
  }
};

using FloatBuffer = std::vector<float, CacheLineAllocator<float>>;

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
