#include "comm/collective/collective.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace pstrain {
namespace {

// AllGatherBytes sends every rank's size through one sum in which only the
// owner of a slot adds a non-zero value, so any backend's sum order gives
// the owner's value back. Each size is cut into two 16-bit halves, exact in
// a float; a third float says the owner refused to send (too many bytes).
constexpr int kSizeFloats = 3;
constexpr float kHalf = 65536.0f;

// One half as it came back from the sum: an integer in [0, 2^16) or an
// error (a peer that sent garbage).
bool ValidHalf(float half) { return half >= 0 && half < kHalf && std::floor(half) == half; }

}  // namespace

Status Collective::AllReduce(float* data, int64_t n, ReduceOp op) {
  if (world() == 1 || n == 0) return Status::OK();
  PSTRAIN_RETURN_IF_ERROR(SumInPlace(data, n));
  if (op == ReduceOp::kAverage) {
    const float scale = 1.0f / static_cast<float>(world());
    for (int64_t i = 0; i < n; ++i) data[i] *= scale;
  }
  return Status::OK();
}

Status Collective::Broadcast(float* data, int64_t n, int root) {
  if (root < 0 || root >= world())
    return InvalidArgument(fmt::format("broadcast from rank {} in a ring of {}", root, world()));
  if (world() == 1 || n == 0) return Status::OK();
  return BroadcastInPlace(data, n, root);
}

Status Collective::AllGatherBytes(const std::vector<uint8_t>& mine,
                                  std::vector<std::vector<uint8_t>>* all, uint64_t max_bytes) {
  const int w = world(), me = rank();
  all->assign(static_cast<size_t>(w), {});
  max_bytes = std::min<uint64_t>(max_bytes, std::numeric_limits<uint32_t>::max());
  if (w == 1) {
    if (mine.size() > max_bytes)
      return InvalidArgument(
          fmt::format("{} bytes to all-gather, more than the {} allowed", mine.size(), max_bytes));
    (*all)[0] = mine;
    return Status::OK();
  }
  // 1. Every rank's size, through one sum (every rank takes part, even one
  //    that refuses, so that no rank is left waiting in a broadcast).
  std::vector<float> sizes(static_cast<size_t>(kSizeFloats * w), 0.0f);
  float* own = &sizes[static_cast<size_t>(kSizeFloats * me)];
  if (mine.size() > max_bytes) {
    own[2] = 1;
  } else {
    own[0] = static_cast<float>(mine.size() & 0xffff);
    own[1] = static_cast<float>(mine.size() >> 16);
  }
  PSTRAIN_RETURN_IF_ERROR(
      AllReduce(sizes.data(), static_cast<int64_t>(sizes.size()), ReduceOp::kSum)
          .WithContext("all-gathering the sizes"));
  std::vector<uint64_t> bytes(static_cast<size_t>(w));
  for (int r = 0; r < w; ++r) {
    const float* slot = &sizes[static_cast<size_t>(kSizeFloats * r)];
    if (slot[2] != 0)
      return InvalidArgument(
          fmt::format("rank {} has more than {} bytes to all-gather", r, max_bytes));
    if (!ValidHalf(slot[0]) || !ValidHalf(slot[1]))
      return InvalidArgument(
          fmt::format("rank {}'s size did not arrive intact ({}, {})", r, slot[0], slot[1]));
    bytes[r] = static_cast<uint64_t>(slot[0]) + (static_cast<uint64_t>(slot[1]) << 16);
    if (bytes[r] > max_bytes)
      return InvalidArgument(
          fmt::format("rank {} sends {} bytes, more than the {} allowed", r, bytes[r], max_bytes));
  }
  // 2. Each rank's bytes, broadcast from it, packed into floats (padded to
  //    4 bytes): a broadcast copies bits and never adds, so any bytes pass.
  std::vector<float> words;
  for (int r = 0; r < w; ++r) {
    const size_t n = static_cast<size_t>(bytes[r]);
    words.assign((n + sizeof(float) - 1) / sizeof(float), 0.0f);
    if (r == me && n > 0) std::memcpy(words.data(), mine.data(), n);
    PSTRAIN_RETURN_IF_ERROR(Broadcast(words.data(), static_cast<int64_t>(words.size()), r)
                                .WithContext(fmt::format("all-gathering rank {}'s bytes", r)));
    const auto* first = reinterpret_cast<const uint8_t*>(words.data());
    (*all)[r].assign(first, first + n);
  }
  return Status::OK();
}

Status Collective::Barrier() {
  float token = 0;
  return AllReduce(&token, 1, ReduceOp::kSum);
}

}  // namespace pstrain
