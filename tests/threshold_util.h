// Helpers of the threshold codec's tests (tests/threshold_codec_test.cc,
// tests/threshold_values_test.cc): configs, gradients, and the bytes of a
// message to spoil.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "optim/threshold_codec.h"

namespace pstrain::threshold_testing {

// The codec after its warm-up (the warm-up's own cases set it).
inline CompressionConfig Threshold(float tau, bool adaptive = false) {
  CompressionConfig config;
  config.type = CompressionType::kThreshold;
  config.threshold = tau;
  config.adaptive = adaptive;
  config.warmup_epochs = 0;
  return config;
}

inline std::vector<float> Normal(int64_t n, float sigma, std::mt19937* rng) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(*rng);
  return v;
}

// Random multiples of 2^-14 in (-1, 1): every partial sum of 200 of them and
// of tau (a multiple of 2^-14 too) is a multiple of 2^-14 below 2^8 in
// magnitude, 22 significant bits, which a float's 24-bit mantissa holds
// exactly. So every addition and subtraction the encoder, the decoder and
// the test make is exact, and the bookkeeping can be checked with ==.
inline std::vector<float> Dyadic(int64_t n, std::mt19937* rng) {
  std::uniform_int_distribution<int32_t> dist(-(1 << 14) + 1, (1 << 14) - 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = std::ldexp(static_cast<float>(dist(*rng)), -14);
  return v;
}

inline std::string ErrorOf(const std::vector<uint8_t>& message, int64_t n,
                           std::vector<float>* out) {
  Status status = DecodeThresholdAdd(message.data(), message.size(), n, 1.0f, out->data());
  return status.ok() ? "" : status.message();
}

inline void SetU32(std::vector<uint8_t>* m, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*m)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void SetF32(std::vector<uint8_t>* m, size_t at, float f) {
  uint32_t v = 0;
  std::memcpy(&v, &f, 4);
  SetU32(m, at, v);
}

// A valid message spoilt one way, and what its refusal must say.
struct Spoilt {
  const char* name;
  bool bitmap;  // spoils the bitmap-form message, else the sparse one
  std::function<void(std::vector<uint8_t>*)> spoil;
  const char* error;
};

// Each case spoils a fresh copy of sparse() (for `sparse_n` elements) or
// bitmap() (`bitmap_n`): decoding it fails with an error that contains
// the case's, names the message, and leaves `out` as it was.
template <typename Sparse, typename Bitmap>
void CheckRefusals(const std::vector<Spoilt>& cases, Sparse sparse, int64_t sparse_n, Bitmap bitmap,
                   int64_t bitmap_n) {
  for (const Spoilt& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    std::vector<uint8_t> message = c.bitmap ? bitmap() : sparse();
    const int64_t n = c.bitmap ? bitmap_n : sparse_n;
    std::vector<float> out(n, 3.0f);
    c.spoil(&message);
    const std::string error = ErrorOf(message, n, &out);
    CAPTURE(error);
    CHECK(error.find(c.error) != std::string::npos);
    CHECK(error.rfind("threshold message: ", 0) == 0);
    CHECK(out == std::vector<float>(n, 3.0f));
  }
}

}  // namespace pstrain::threshold_testing
