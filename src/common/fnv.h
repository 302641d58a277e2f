// Hashes for fingerprints that are compared, never stored: FNV-1a over
// bytes, and SplitMix64's finalizer for entries whose hashes are summed (an
// order-free fingerprint of a set), so that each is mixed well.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pstrain {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;

// FNV-1a, 64 bits, of `size` bytes at `data`, from `h`.
inline uint64_t Fnv(uint64_t h, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

inline uint64_t Mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace pstrain
