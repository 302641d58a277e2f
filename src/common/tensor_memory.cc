#include "src/common/tensor_memory.h"

#include <sys/mman.h>

#include <new>

namespace pstrain {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr std::align_val_t kCacheLine{64};
constexpr std::align_val_t kHugeAlignment{kHugePage};

}  // namespace

void* AllocateTensorMemory(size_t bytes) {
  if (bytes < kHugePage) return ::operator new(bytes, kCacheLine);
  void* p = ::operator new(bytes, kHugeAlignment);
  // Advice only: without transparent huge pages it changes nothing.
  (void)madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

void FreeTensorMemory(void* p, size_t bytes) {
  ::operator delete(p, bytes < kHugePage ? kCacheLine : kHugeAlignment);
}

}  // namespace pstrain
