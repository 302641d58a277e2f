// PrefetchForRead: starts loading the cache line at `p`, so that a loop over
// scattered rows can overlap their memory latencies.
//
// Why not plain __builtin_prefetch: GCC 12 finds a function whose only
// effect is a prefetch "pure", and deletes calls to it whose result is
// unused; that silently removed every prefetch of SparseTable::Lookup. The
// empty volatile asm is an effect the optimizer keeps, and costs nothing.
#pragma once

namespace pstrain {

inline void PrefetchForRead(const void* p) {
  __builtin_prefetch(p);
  asm volatile("" : : "r"(p));
}

}  // namespace pstrain
