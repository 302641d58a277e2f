#include "optim/threshold_values.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "optim/threshold_wire.h"

namespace pstrain::threshold_values {
namespace {

using threshold_wire::Bad;
using threshold_wire::GetU32;
using threshold_wire::GetVarint;
using threshold_wire::PutU32;
using threshold_wire::PutVarint;
using threshold_wire::ReadIndex;
using threshold_wire::VarintBytes;

constexpr uint8_t kSparse = 3;

size_t PresenceBytes(int64_t n) { return static_cast<size_t>((n + 7) / 8); }

// Values travel as the bits of little-endian u32s.
void PutFloat(uint8_t* p, float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  PutU32(p, bits);
}

float GetFloat(const uint8_t* p) {
  const uint32_t bits = GetU32(p);
  float v = 0;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// The sent values, after the indices: all finite, none under tau.
Status CheckValues(const uint8_t* values, uint32_t count, float tau) {
  for (uint32_t k = 0; k < count; ++k) {
    const float v = GetFloat(values + 4 * static_cast<size_t>(k));
    if (!std::isfinite(v) || !(std::fabs(v) >= tau)) {
      return Bad("value " + std::to_string(k) + " (" + std::to_string(v) +
                 ") is not finite or is under tau " + std::to_string(tau));
    }
  }
  return Status::OK();
}

}  // namespace

size_t BodyBound(int64_t n) { return PresenceBytes(n) + 4 * static_cast<size_t>(n); }

size_t Encode(float* residual, const float* gradient, int64_t n, float tau, uint8_t* body,
              uint32_t* count, bool* bitmap, std::vector<uint64_t>* masks) {
  // Pass 1, per block of 64: the residual update (the same float sum as the
  // +-tau formats) and a mask of the elements that reached tau, in a loop
  // that vectorizes.
  const int64_t blocks = (n + 63) / 64;
  masks->resize(static_cast<size_t>(blocks));
  uint32_t sent = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t base = 64 * b, len = std::min<int64_t>(64, n - base);
    float* r = residual + base;
    const float* g = gradient + base;
    uint64_t mask = 0;
    for (int64_t j = 0; j < len; ++j) {
      r[j] += g[j];
      mask |= uint64_t{std::fabs(r[j]) >= tau} << j;
    }
    (*masks)[b] = mask;
    sent += static_cast<uint32_t>(__builtin_popcountll(mask));
  }
  *count = sent;
  // The sparse form takes at least a byte per element: past n / 8 elements
  // the bitmap is smaller without counting.
  size_t index_bytes = 0;
  *bitmap = sent > PresenceBytes(n);
  if (!*bitmap) {
    int64_t previous = -1;
    for (int64_t b = 0; b < blocks; ++b) {
      for (uint64_t m = (*masks)[b]; m != 0; m &= m - 1) {
        const int64_t i = 64 * b + __builtin_ctzll(m);
        index_bytes += VarintBytes(static_cast<uint32_t>(i - previous - 1));
        previous = i;
      }
    }
    *bitmap = index_bytes > PresenceBytes(n);
  }
  const size_t indices = *bitmap ? PresenceBytes(n) : index_bytes;
  // Pass 2: the indices and the values of what pass 1 found.
  uint8_t* values = body + indices;
  uint8_t* at = body;
  int64_t previous = -1;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint64_t mask = (*masks)[b];
    if (*bitmap) {  // the block's mask is its 8 bytes of bitmap, little-endian
      const size_t bytes = std::min<size_t>(8, PresenceBytes(n) - 8 * static_cast<size_t>(b));
      for (size_t k = 0; k < bytes; ++k) at[k] = static_cast<uint8_t>(mask >> (8 * k));
      at += bytes;
    }
    for (uint64_t m = mask; m != 0; m &= m - 1) {
      const int64_t i = 64 * b + __builtin_ctzll(m);
      if (!*bitmap) {
        at += PutVarint(at, static_cast<uint32_t>(i - previous - 1));
        previous = i;
      }
      PutFloat(values, residual[i]);
      values += 4;
      residual[i] = 0.0f;
    }
  }
  return indices + 4 * static_cast<size_t>(sent);
}

Status Check(uint8_t format, const uint8_t* body, const uint8_t* end, uint32_t count, int64_t n,
             float tau) {
  const size_t value_bytes = 4 * static_cast<size_t>(count);
  if (format == kSparse) {
    const uint8_t* p = body;
    int64_t index = -1;
    for (uint32_t k = 0; k < count; ++k) {
      uint32_t v = 0;
      Status read = ReadIndex(&p, end, k, count, n, /*flag_bits=*/0, &index, &v);
      if (!read.ok()) return read;
    }
    if (static_cast<size_t>(end - p) != value_bytes) {
      return Bad(std::to_string(end - p) + " bytes after the indices, expected " +
                 std::to_string(value_bytes) + " for " + std::to_string(count) + " values");
    }
    return CheckValues(p, count, tau);
  }
  const size_t presence = PresenceBytes(n);
  if (static_cast<size_t>(end - body) != presence + value_bytes) {
    return Bad("values bitmap body of " + std::to_string(end - body) + " bytes, expected " +
               std::to_string(presence + value_bytes));
  }
  int64_t set = 0;
  for (size_t b = 0; b < presence; ++b) set += __builtin_popcount(body[b]);
  const int tail = static_cast<int>(n % 8);
  if (tail != 0 && (body[presence - 1] >> tail) != 0) {
    return Bad("bitmap bits set past element " + std::to_string(n - 1));
  }
  if (set != count) {
    return Bad("bitmap sends " + std::to_string(set) + " elements, count says " +
               std::to_string(count));
  }
  return CheckValues(body + presence, count, tau);
}

void Apply(uint8_t format, const uint8_t* body, const uint8_t* end, uint32_t count, int64_t n,
           float scale, float* out) {
  if (format == kSparse) {
    const uint8_t* p = body;
    int64_t index = -1;
    for (uint32_t k = 0; k < count; ++k) {
      uint32_t v = 0;
      GetVarint(&p, end, &v);  // checked
      index += static_cast<int64_t>(v) + 1;
      out[index] += scale * GetFloat(end - 4 * static_cast<size_t>(count - k));
    }
    return;
  }
  const uint8_t* values = body + PresenceBytes(n);
  for (int64_t b = 0; b < static_cast<int64_t>(PresenceBytes(n)); ++b) {
    for (unsigned m = body[b]; m != 0; m &= m - 1) {
      out[8 * b + __builtin_ctz(m)] += scale * GetFloat(values);
      values += 4;
    }
  }
}

}  // namespace pstrain::threshold_values
