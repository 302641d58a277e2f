// Byte-level helpers shared by the threshold codec's formats
// (optim/threshold_codec.h): little-endian u32 fields and LEB128 varints,
// written and read byte by byte so that the layout does not depend on the
// host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "src/common/status.h"

namespace pstrain::threshold_wire {

// A LEB128 varint of a 32-bit value takes at most 5 bytes.
inline constexpr size_t kMaxVarint = 5;

inline void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

inline uint32_t GetU32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

inline size_t VarintBytes(uint32_t v) {
  size_t len = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++len;
  }
  return len;
}

inline size_t PutVarint(uint8_t* p, uint32_t v) {
  size_t len = 0;
  while (v >= 0x80) {
    p[len++] = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  p[len++] = static_cast<uint8_t>(v);
  return len;
}

// Reads one varint of at most 5 bytes from [*p, end). False when it is cut
// short (then *p is end), longer than 5 bytes, over 32 bits, or not in its
// shortest form (a message has one encoding, so a decoded message re-encodes
// to itself).
inline bool GetVarint(const uint8_t** p, const uint8_t* end, uint32_t* v) {
  uint64_t value = 0;
  const uint8_t* q = *p;
  for (size_t i = 0; i < kMaxVarint; ++i) {
    if (q == end) {
      *p = end;
      return false;
    }
    const uint8_t byte = *q++;
    value |= uint64_t{byte & 0x7fu} << (7 * i);
    if ((byte & 0x80) == 0) {
      if (i > 0 && byte == 0) return false;  // overlong
      if (value > 0xffffffffu) return false;
      *v = static_cast<uint32_t>(value);
      *p = q;
      return true;
    }
  }
  return false;
}

// A bad message: the one-line error every format gives.
inline Status Bad(const std::string& what) { return InvalidArgument("threshold message: " + what); }

// Reads index k of a message's `count` (sparse formats: varints, each the
// gap to the previous index shifted left by `flag_bits`, flags below) and
// moves *index (-1 before the first) to the element it names, < n; *varint
// gets the value read, flags and all.
inline Status ReadIndex(const uint8_t** p, const uint8_t* end, uint32_t k, uint32_t count,
                        int64_t n, int flag_bits, int64_t* index, uint32_t* varint) {
  if (!GetVarint(p, end, varint)) {
    return Bad(*p == end ? "cut short after " + std::to_string(k) + " of " + std::to_string(count) +
                               " indices"
                         : "index " + std::to_string(k) + " is not a well-formed varint");
  }
  *index += static_cast<int64_t>(*varint >> flag_bits) + 1;
  if (*index >= n) {
    return Bad("index " + std::to_string(*index) + " is out of range for " + std::to_string(n) +
               " elements");
  }
  return Status::OK();
}

}  // namespace pstrain::threshold_wire
