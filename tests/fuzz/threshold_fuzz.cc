// DecodeThresholdAdd (optim/threshold_codec.h) fed arbitrary messages, as a
// server or a worker receives them from a peer (seeds: sparse and bitmap
// and values messages from the encoder, corpus/threshold_fuzz/). The input
// is the message; the expected size is the n its header names when that is
// at most kMaxN (so the fuzzer gets past the size check), else kMaxN.
// Beyond the sanitizers:
//   - an error leaves `out` untouched, bit for bit;
//   - a message that decodes adds +-tau (formats 1 and 2) or a finite value
//     of at least tau in magnitude (3 and 4) or nothing to each element, to
//     as many elements as it says it sends, whatever `out` held;
//   - a message that decodes re-encodes (an encoder with its tau, fed what it
//     added) to a message that decodes to the same values, and to the same
//     bytes when the encoder picks the same format (one encoding each).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "optim/threshold_codec.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

constexpr int64_t kMaxN = 1 << 12;

uint32_t U32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  int64_t n = kMaxN;
  if (size >= kThresholdHeaderBytes) {
    const uint32_t header_n = U32(data + 4);
    if (header_n >= 1 && header_n <= kMaxN) n = header_n;
  }
  // `zero` starts at 0; `held` at values a decode must add to, not replace.
  std::vector<float> zero(static_cast<size_t>(n), 0.0f), held(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) held[i] = 0.5f * static_cast<float>(i % 7) - 1.25f;
  const std::vector<float> held_before = held;

  int64_t sent = -1;
  const Status a = DecodeThresholdAdd(data, size, n, 1.0f, zero.data(), &sent);
  const Status b = DecodeThresholdAdd(data, size, n, 1.0f, held.data());
  if (a.ok() != b.ok()) fuzz::Fail("the verdict depends on what out held");
  if (!a.ok()) {
    for (float x : zero)
      if (x != 0.0f || std::signbit(x)) fuzz::Fail("an error wrote to out", a.message());
    if (std::memcmp(held.data(), held_before.data(), held.size() * sizeof(float)) != 0)
      fuzz::Fail("an error wrote to out", a.message());
    if (a.message().rfind("threshold message: ", 0) != 0 ||
        a.message().find('\n') != std::string::npos)
      fuzz::Fail("an error that is not one line naming the message", a.message());
    return 0;
  }

  float tau = 0;
  const uint32_t tau_bits = U32(data + 8);
  std::memcpy(&tau, &tau_bits, sizeof tau);
  if (!std::isfinite(tau) || !(tau > 0)) fuzz::Fail("decoded a message with a bad tau");
  if (sent != U32(data + 12)) fuzz::Fail("sent is not the header's count");
  const bool values = data[0] >= static_cast<uint8_t>(ThresholdFormat::kValues);
  int64_t changed = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (zero[i] == 0.0f) {
      if (std::memcmp(&held[i], &held_before[i], sizeof(float)) != 0)
        fuzz::Fail("an element not sent changed");
      continue;
    }
    if (values) {
      if (!std::isfinite(zero[i]) || !(std::fabs(zero[i]) >= tau))
        fuzz::Fail("an element got a value under tau or not finite");
    } else if (zero[i] != tau && zero[i] != -tau) {
      fuzz::Fail("an element got neither +tau nor -tau");
    }
    ++changed;
    if (held[i] != held_before[i] + zero[i]) fuzz::Fail("decoding replaced instead of adding");
  }
  if (changed != sent) fuzz::Fail("elements changed != elements sent");

  // The encoder keeps tau a normal float; a subnormal tau it never writes.
  if (tau < std::numeric_limits<float>::min()) return 0;
  CompressionConfig config;
  config.type = CompressionType::kThreshold;
  config.threshold = tau;
  config.adaptive = false;
  config.warmup_epochs = 0;  // the message's own tau, not one picked from the data
  ThresholdEncoder encoder(n, config);
  std::vector<uint8_t> again;
  const ThresholdEncodeStats stats =
      values ? encoder.EncodeValues(zero.data(), tau, &again) : encoder.Encode(zero.data(), &again);
  if (stats.sent != sent) fuzz::Fail("re-encoding sends another count");
  for (float r : encoder.residual())
    if (r != 0.0f) fuzz::Fail("re-encoding left a residual");
  if (again.size() > ThresholdMessageBound(n)) fuzz::Fail("re-encoding is over the bound");
  std::vector<float> twice(static_cast<size_t>(n), 0.0f);
  const Status c = DecodeThresholdAdd(again.data(), again.size(), n, 1.0f, twice.data());
  if (!c.ok()) fuzz::Fail("the encoder's own message is refused", c.message());
  if (twice != zero) fuzz::Fail("re-encoded message decodes to other values");
  if (again[0] == data[0] && (again.size() != size || std::memcmp(again.data(), data, size) != 0))
    fuzz::Fail("a message of the encoder's format re-encodes to other bytes");
  return 0;
}
