// Memory for tensors: 64-byte aligned, and backed by 2 MiB pages when large.
//
// Alignment: Eigen's vectorized sums peel scalar elements until the first
// aligned one, so where malloc put an array would otherwise change the order
// of additions and the float result from one process to the next.
//
// Huge pages: a tensor of 2 MiB or more starts on a 2 MiB boundary and is
// marked MADV_HUGEPAGE (the kernel's default is `madvise`). Streaming 64 MiB
// through all-reduce or push/pull over 4 KiB pages ran at 1.4 GB/s one time
// and 4.5 GB/s the next, depending on what the kernel happened to back the
// array with; with 2 MiB pages it is steady at the fast end.
#pragma once

#include <cstddef>
#include <vector>

namespace pstrain {

// Never null (throws std::bad_alloc as operator new does). Free with the
// same `bytes`.
void* AllocateTensorMemory(size_t bytes);
void FreeTensorMemory(void* p, size_t bytes);

// The allocator of FloatBuffer.
template <typename T>
struct TensorAllocator {
  using value_type = T;
  TensorAllocator() = default;
  template <typename U>
  TensorAllocator(const TensorAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(AllocateTensorMemory(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { FreeTensorMemory(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const TensorAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const TensorAllocator<U>&) const {
    return false;
  }
};

// Floats in tensor memory: model weights and gradients, server partitions.
using FloatBuffer = std::vector<float, TensorAllocator<float>>;

}  // namespace pstrain
