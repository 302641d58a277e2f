// EpochRest: the positions of an epoch's permutation (src/data/batcher.h)
// still to be trained, in the order they will be: the ranges of `make_up`
// first, then every position from `skip` on. A run that goes on with
// another worker count, resumed or changed live, cuts its global batches
// from it (roles/checkpoint/worker_place.h, PlanEpochs).
//
// make_up holds what a lost worker never trained: its batches between its
// last push and the live change that dropped it (roles/scheduler/
// lost_worker.cc), which the others train first. Its ranges lie below
// `skip` (the positions before it were handed out) and do not overlap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/status.h"

namespace pstrain {

// Permutation positions [begin, end).
struct PositionRange {
  int64_t begin = 0;
  int64_t end = 0;
  bool operator==(const PositionRange& o) const { return begin == o.begin && end == o.end; }
};

struct EpochRest {
  std::vector<PositionRange> make_up;
  int64_t skip = 0;

  // Positions left of an epoch of `samples`.
  int64_t Size(int64_t samples) const;
  int64_t MakeUpSize() const;
  // The permutation ranges of this rest's positions [from, to), in order.
  std::vector<PositionRange> Slice(int64_t from, int64_t to, int64_t samples) const;
  // What is left once its first `count` positions were trained.
  EpochRest After(int64_t count, int64_t samples) const;
  // OK when make_up lies below skip without overlaps, and skip within
  // `samples` (-1: unknown); otherwise what is wrong, in one line.
  Status Check(int64_t samples = -1) const;
};

// Appends [begin, end) to `ranges`, merged with the last when they touch.
void AppendRange(std::vector<PositionRange>* ranges, PositionRange range);

// "10-42,74-106" and back ("" is none). Reading refuses more than
// kMaxMakeUpRanges ranges, and any that is empty or negative.
inline constexpr size_t kMaxMakeUpRanges = 1 << 20;
std::string PositionRangesText(const std::vector<PositionRange>& ranges);
StatusOr<std::vector<PositionRange>> ParsePositionRanges(const std::string& text);

}  // namespace pstrain
