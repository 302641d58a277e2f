// Zipf-distributed embedding ids for the embedding benches
// (bench_embedding.cc, bench_tiered.cc): rank k of n drawn with probability
// proportional to (k+1)^-s, by inverse CDF; ids are the ranks scattered, so
// that neighbours in rank are not neighbours in a table.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "embedding/id_dedup.h"
#include "src/common/random.h"

namespace pstrain {

// The id of the n-th row or rank: a mix. Not a bijection (24 bits are
// dropped), but the first 2^20 values, all these benchmarks use, are
// distinct.
inline int64_t ScatteredId(int64_t n) {
  return static_cast<int64_t>(Mix64(static_cast<uint64_t>(n)) >> 24);
}

class ZipfIds {
 public:
  ZipfIds(int64_t n, double s, uint64_t seed) : cdf_(static_cast<size_t>(n)), rng_(seed) {
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) cdf_[k] = sum += std::pow(static_cast<double>(k + 1), -s);
    for (double& c : cdf_) c /= sum;
  }
  int64_t Next() {
    const double u = rng_.Uniform();
    const auto rank = std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
    return ScatteredId(std::min<int64_t>(rank, static_cast<int64_t>(cdf_.size()) - 1));
  }
  // The unique ids of one batch of `draws` draws.
  const std::vector<int64_t>& Round(IdDedup* dedup, size_t draws) {
    draws_.resize(draws);
    for (int64_t& id : draws_) id = Next();
    dedup->Reset(draws_.data(), draws_.size());
    return dedup->unique();
  }

 private:
  std::vector<double> cdf_;
  Rng rng_;
  std::vector<int64_t> draws_;
};

}  // namespace pstrain
