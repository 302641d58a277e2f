// The bodies of exact-value threshold messages, formats 3 and 4 of
// optim/threshold_codec.h (its header, checks of the header and the choice
// of format are there): every element whose accumulated value reached tau
// goes out with that value itself, not +-tau, and its residual becomes 0.
// Warm-up messages take this form: at a high share of elements, +-tau would
// clip the elements that matter most to the median's size.
//
//   values sparse (3): `count` LEB128 varints, each the index minus the
//                      previous index minus 1 (the first: the index), then
//                      `count` f32 values in index order
//   values bitmap (4): ceil(n / 8) bytes, element i in bit i % 8 of byte
//                      i / 8 (exactly `count` set, padding bits 0), then the
//                      `count` f32 values in index order
// Every value is finite and at least tau in magnitude (what the encoder
// sends, so what the decoder insists on).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/common/status.h"

namespace pstrain::threshold_values {

// The largest body for n elements: the presence bitmap and n values.
size_t BodyBound(int64_t n);

// Adds gradient[0..n) to residual[0..n), then writes the body of a message
// sending every element with |residual| >= tau at `body` (room for
// BodyBound(n) bytes) and sets its residual to 0. Returns the body's bytes;
// *count gets the elements sent, *bitmap whether the bitmap form was the
// smaller. `masks` is the caller's scratch (kept to reuse its memory).
size_t Encode(float* residual, const float* gradient, int64_t n, float tau, uint8_t* body,
              uint32_t* count, bool* bitmap, std::vector<uint64_t>* masks);

// Checks a body of `format` (3 or 4) for n elements, count and tau from a
// header the caller checked; the error names what was wrong.
Status Check(uint8_t format, const uint8_t* body, const uint8_t* end, uint32_t count, int64_t n,
             float tau);

// Adds scale * value to out[index] for every element of a body Check
// accepted.
void Apply(uint8_t format, const uint8_t* body, const uint8_t* end, uint32_t count, int64_t n,
           float scale, float* out);

}  // namespace pstrain::threshold_values
