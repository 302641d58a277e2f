// Random numbers that are the same on every platform. The standard
// distributions (and std::shuffle) are implementation-defined, so two workers
// built against different C++ libraries could disagree on an epoch's order or
// on initial weights, which they must agree on without exchanging them; these
// are written out here instead. An Rng is not thread-safe: one per thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pstrain {

// SplitMix64's output function: a bijective 64-bit mix (Steele et al. 2014).
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A seed for stream `stream` of `seed` (an epoch, a shard): streams of one
// seed do not overlap in practice, and nearby seeds give unrelated streams.
inline uint64_t StreamSeed(uint64_t seed, uint64_t stream) { return Mix64(Mix64(seed) ^ stream); }

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

// SplitMix64: small state, passes BigCrush, plenty for shuffling and sampling.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return Mix64(state_ - 0x9e3779b97f4a7c15ULL);
  }
  // Uniform in [0, 1), 53 bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n), n > 0: rejects the few values that would bias `% n`.
  uint64_t Below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    uint64_t x = Next();
    while (x < threshold) x = Next();
    return x % n;
  }
  // Standard normal (Box-Muller; the second value is dropped for simplicity).
  double Normal() {
    const double u1 = 1.0 - Uniform();  // (0, 1]: log() stays finite
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

// Fisher-Yates with Rng: the same order for the same seed everywhere.
template <typename T>
void Shuffle(std::vector<T>* v, Rng* rng) {
  for (size_t i = v->size(); i > 1; --i) {
    std::swap((*v)[i - 1], (*v)[rng->Below(i)]);
  }
}

}  // namespace pstrain
