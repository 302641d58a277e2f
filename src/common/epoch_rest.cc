#include "src/common/epoch_rest.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace pstrain {

int64_t EpochRest::MakeUpSize() const {
  int64_t n = 0;
  for (const PositionRange& r : make_up) n += r.end - r.begin;
  return n;
}

int64_t EpochRest::Size(int64_t samples) const {
  return MakeUpSize() + std::max<int64_t>(0, samples - skip);
}

void AppendRange(std::vector<PositionRange>* ranges, PositionRange range) {
  if (range.end <= range.begin) return;
  if (!ranges->empty() && ranges->back().end == range.begin) {
    ranges->back().end = range.end;
  } else {
    ranges->push_back(range);
  }
}

std::vector<PositionRange> EpochRest::Slice(int64_t from, int64_t to, int64_t samples) const {
  std::vector<PositionRange> out;
  int64_t at = 0;  // this rest's position of the range walked
  auto take = [&](PositionRange r) {
    const int64_t length = r.end - r.begin;
    const int64_t lo = std::max(from, at), hi = std::min(to, at + length);
    if (lo < hi) AppendRange(&out, {r.begin + (lo - at), r.begin + (hi - at)});
    at += length;
  };
  for (const PositionRange& r : make_up) take(r);
  take({skip, std::max(skip, samples)});
  return out;
}

EpochRest EpochRest::After(int64_t count, int64_t samples) const {
  EpochRest rest;
  const int64_t made_up = MakeUpSize();
  if (count < made_up) rest.make_up = Slice(count, made_up, samples);
  rest.skip = skip + std::max<int64_t>(0, count - made_up);
  return rest;
}

Status EpochRest::Check(int64_t samples) const {
  if (skip < 0 || (samples >= 0 && skip > samples))
    return InvalidArgument(fmt::format("{} samples trained of an epoch of {}", skip, samples));
  std::vector<PositionRange> sorted = make_up;
  std::sort(sorted.begin(), sorted.end(),
            [](const PositionRange& a, const PositionRange& b) { return a.begin < b.begin; });
  int64_t last_end = 0;
  for (const PositionRange& r : sorted) {
    if (r.begin < last_end || r.end <= r.begin || r.end > skip)
      return InvalidArgument(
          fmt::format("the positions to make up ({}) overlap or do not lie below the {} trained",
                      PositionRangesText(make_up).substr(0, 80), skip));
    last_end = r.end;
  }
  return Status::OK();
}

std::string PositionRangesText(const std::vector<PositionRange>& ranges) {
  std::string text;
  for (const PositionRange& r : ranges)
    text += fmt::format("{}{}-{}", text.empty() ? "" : ",", r.begin, r.end);
  return text;
}

StatusOr<std::vector<PositionRange>> ParsePositionRanges(const std::string& text) {
  std::vector<PositionRange> ranges;
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    if (ranges.size() == kMaxMakeUpRanges)
      return InvalidArgument(fmt::format("more than {} position ranges", kMaxMakeUpRanges));
    PositionRange r;
    auto first = std::from_chars(p, end, r.begin);
    if (first.ec != std::errc() || first.ptr == end || *first.ptr != '-')
      return InvalidArgument(
          fmt::format("position ranges '{}': not 'begin-end,...'", text.substr(0, 80)));
    auto second = std::from_chars(first.ptr + 1, end, r.end);
    if (second.ec != std::errc() || r.begin < 0 || r.end <= r.begin ||
        (second.ptr != end && *second.ptr != ','))
      return InvalidArgument(
          fmt::format("position ranges '{}': not 'begin-end,...' with begin < "
                      "end",
                      text.substr(0, 80)));
    ranges.push_back(r);
    p = second.ptr == end ? end : second.ptr + 1;
    if (second.ptr != end && p == end)
      return InvalidArgument(fmt::format("position ranges '{}' end with ','", text.substr(0, 80)));
  }
  return ranges;
}

}  // namespace pstrain
