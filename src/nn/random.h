// Deterministic random bits for initializers and dropout. The same inputs give
// the same numbers on every machine and standard library, which is why no
// std::*_distribution is used: their output is implementation-defined, and
// workers must agree on initial weights without exchanging them.
#pragma once

#include <cstdint>
#include <string>

namespace pstrain {

// SplitMix64's finalizer: a bijection whose output bits all depend on every
// input bit, so nearby inputs (counters, indices) give unrelated outputs.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// FNV-1a: stable across platforms, unlike std::hash.
inline uint64_t HashString(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

// The key of a named random stream: depends on both, symmetric in neither.
inline uint64_t StreamKey(uint64_t seed, const std::string& name) {
  return Mix64(Mix64(seed) ^ HashString(name));
}

// Uniform in [0, 1) from the top 24 bits (a float's mantissa holds 24).
inline float UnitFloat(uint64_t bits) {
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

}  // namespace pstrain
