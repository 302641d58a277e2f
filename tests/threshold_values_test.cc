// Values messages of the threshold codec (optim/threshold_values.h, the
// warm-up's formats 3 and 4): exact values in the smaller form, nothing
// lost, and every malformed body refused without touching the output.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "optim/threshold_codec.h"
#include "tests/threshold_util.h"

namespace pstrain {
namespace {

using namespace threshold_testing;

// Values messages (formats 3 and 4): each element sent carries its own
// accumulated value and its residual becomes 0; the sparse or the bitmap
// form, whichever is smaller, and never over the bound.
TEST_CASE("values messages send exact values, in the smaller form, within the bound") {
  std::mt19937 rng(6);
  const int64_t n = 10007;
  bool saw_sparse = false, saw_bitmap = false;
  for (int percent = 0; percent <= 100; percent += 5) {
    std::bernoulli_distribution pick(percent / 100.0);
    std::vector<float> gradient = Normal(n, 1.0f, &rng);
    for (float& g : gradient) g = pick(rng) ? (g >= 0 ? 1.0f + g : g - 1.0f) : 0.5f * g / 8;
    ThresholdEncoder encoder(n, Threshold(1.0f));
    std::vector<uint8_t> message;
    const ThresholdEncodeStats stats = encoder.EncodeValues(gradient.data(), 1.0f, &message);
    CHECK(ThresholdMessageSendsValues(message));
    CHECK(message.size() <= ThresholdMessageBound(n));
    size_t indices = 0;
    int64_t previous = -1, sent = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::fabs(gradient[i]) < 1.0f) continue;
      ++sent;
      uint32_t v = static_cast<uint32_t>(i - previous - 1);
      previous = i;
      do {
        ++indices;
        v >>= 7;
      } while (v != 0);
    }
    const bool bitmap = indices > static_cast<size_t>((n + 7) / 8);
    CHECK(stats.sent == sent);
    CHECK(stats.format == (bitmap ? ThresholdFormat::kValuesBitmap : ThresholdFormat::kValues));
    CHECK(message.size() ==
          kThresholdHeaderBytes + (bitmap ? (n + 7) / 8 : indices) + 4 * static_cast<size_t>(sent));
    saw_sparse |= !bitmap;
    saw_bitmap |= bitmap;
    std::vector<float> out(n, 0.0f);
    REQUIRE(DecodeThresholdAdd(message.data(), message.size(), n, 1.0f, out.data()).ok());
    for (int64_t i = 0; i < n; ++i) {
      const bool was_sent = std::fabs(gradient[i]) >= 1.0f;
      CHECK(out[i] == (was_sent ? gradient[i] : 0.0f));
      CHECK(encoder.residual()[i] == (was_sent ? 0.0f : gradient[i]));
    }
  }
  CHECK(saw_sparse);
  CHECK(saw_bitmap);
}

TEST_CASE("values messages: sent + residual == sum of gradients, exactly; scale applies") {
  std::mt19937 rng(7);
  const int64_t n = 3000;
  ThresholdEncoder encoder(n, Threshold(0.25f));
  std::vector<float> sum(n, 0.0f), received(n, 0.0f), one(n);
  std::vector<uint8_t> message;
  for (int step = 0; step < 200; ++step) {
    const std::vector<float> gradient = Dyadic(n, &rng);
    for (int64_t i = 0; i < n; ++i) sum[i] += gradient[i];
    (void)encoder.EncodeValues(gradient.data(), 0.25f + 0.125f * (step % 3), &message);
    std::fill(one.begin(), one.end(), 0.0f);
    REQUIRE(DecodeThresholdAdd(message.data(), message.size(), n, 1.0f, one.data()).ok());
    for (int64_t i = 0; i < n; ++i) received[i] += one[i];
    std::vector<float> quarter(n, 1.0f);
    REQUIRE(DecodeThresholdAdd(message.data(), message.size(), n, 0.25f, quarter.data()).ok());
    for (int64_t i = 0; i < n; ++i) CHECK(quarter[i] == 1.0f + 0.25f * one[i]);
  }
  for (int64_t i = 0; i < n; ++i) CHECK(received[i] + encoder.residual()[i] == sum[i]);
}

// Valid values messages to break: sparse (1.5 at 1 and -2 at 5 of n = 64,
// tau 1: 16 + 2 + 8 bytes) and bitmap (all 7 of n = 7 sent: 16 + 1 + 28).
std::vector<uint8_t> ValuesSparse() {
  ThresholdEncoder encoder(64, Threshold(1.0f));
  std::vector<float> gradient(64, 0.0f);
  gradient[1] = 1.5f;
  gradient[5] = -2.0f;
  std::vector<uint8_t> message;
  (void)encoder.EncodeValues(gradient.data(), 1.0f, &message);
  REQUIRE(message[0] == 3);
  REQUIRE(message.size() == 26);
  return message;
}
std::vector<uint8_t> ValuesBitmap() {
  ThresholdEncoder encoder(7, Threshold(1.0f));
  const std::vector<float> gradient = {1, -1, 2, -2, 3, -3, 4};
  std::vector<uint8_t> message;
  (void)encoder.EncodeValues(gradient.data(), 1.0f, &message);
  REQUIRE(message[0] == 4);
  REQUIRE(message.size() == 45);
  return message;
}

TEST_CASE("malformed values messages are refused with what was wrong, and out is untouched") {
  CheckRefusals(
      {
          {"value under tau", false, [](auto* m) { SetF32(m, 18, 0.5f); },
           "value 0 (0.500000) is not finite or is under tau 1.000000"},
          {"value nan", false, [](auto* m) { SetF32(m, 22, std::nanf("")); }, "value 1 (nan)"},
          {"value inf", true, [](auto* m) { SetF32(m, 17, -INFINITY); }, "value 0 (-inf)"},
          {"trailing byte", false, [](auto* m) { m->push_back(0); },
           "9 bytes after the indices, expected 8 for 2 values"},
          {"a value missing", false, [](auto* m) { m->resize(m->size() - 4); },
           "4 bytes after the indices, expected 8"},
          {"count too big", false, [](auto* m) { SetU32(m, 12, 3); },
           "bytes after the indices, expected 12 for 3 values"},
          {"index out of range", false, [](auto* m) { (*m)[17] = 126; },
           "index 128 is out of range for 64 elements"},
          {"bitmap short", true, [](auto* m) { m->pop_back(); },
           "values bitmap body of 28 bytes, expected 29"},
          {"bitmap count", true, [](auto* m) { SetU32(m, 12, 6); },
           "values bitmap body of 29 bytes"},
          {"bitmap padding", true, [](auto* m) { (*m)[16] |= 0x80; }, "bits set past element 6"},
      },
      ValuesSparse, 64, ValuesBitmap, 7);
}

}  // namespace
}  // namespace pstrain
