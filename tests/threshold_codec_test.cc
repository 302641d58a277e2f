// The threshold codec (optim/threshold_codec.h): what a decoded message adds,
// that the residual loses nothing, that tau settles in its band, the warm-up's
// density per epoch, the bitmap crossover and its size bound, shake-up, and
// every malformed message a peer could send refused without touching the
// output.
#include "optim/threshold_codec.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/threshold_util.h"

namespace pstrain {
namespace {

using namespace threshold_testing;

TEST_CASE("a decoded message adds exactly the thresholded values") {
  std::mt19937 rng(1);
  for (float sigma : {1e-4f, 1e-3f, 1e-2f, 1.0f}) {
    const int64_t n = 1001;  // not a multiple of 4: the bitmap's last byte is partial
    ThresholdEncoder encoder(n, Threshold(1e-3f));
    const std::vector<float> gradient = Normal(n, sigma, &rng);
    std::vector<uint8_t> message;
    const ThresholdEncodeStats stats = encoder.Encode(gradient.data(), &message);
    std::vector<float> expected(n, 0.0f);
    int64_t expected_sent = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (gradient[i] >= 1e-3f) expected[i] = 1e-3f;
      if (gradient[i] <= -1e-3f) expected[i] = -1e-3f;
      expected_sent += expected[i] != 0.0f;
    }
    std::vector<float> out(n, 0.0f);
    int64_t sent = -1;
    REQUIRE(DecodeThresholdAdd(message.data(), message.size(), n, 1.0f, out.data(), &sent).ok());
    CHECK(out == expected);
    CHECK(sent == expected_sent);
    CHECK(stats.sent == expected_sent);
    CHECK(stats.bytes == message.size());
    CHECK(stats.density() == doctest::Approx(static_cast<double>(expected_sent) / n));
    // What was sent left the residual; what was not is all still there.
    for (int64_t i = 0; i < n; ++i) CHECK(encoder.residual()[i] == gradient[i] - expected[i]);
  }
}

TEST_CASE("decoding adds scale * tau to what is already there") {
  const int64_t n = 8;
  ThresholdEncoder encoder(n, Threshold(0.5f));
  const std::vector<float> gradient = {1, -1, 0, 0.25f, 0.5f, -0.5f, 0, 2};
  std::vector<uint8_t> message;
  (void)encoder.Encode(gradient.data(), &message);
  std::vector<float> out(n, 10.0f);
  REQUIRE(DecodeThresholdAdd(message.data(), message.size(), n, 0.25f, out.data()).ok());
  CHECK(out == std::vector<float>{10.125f, 9.875f, 10, 10, 10.125f, 9.875f, 10, 10.125f});
}

TEST_CASE("residual bookkeeping loses nothing: sent + residual == sum of gradients, exactly") {
  std::mt19937 rng(2);
  const int64_t n = 513;
  // tau = 0.75 (dyadic), adaptive off so that every tau stays dyadic; the
  // shake-up's tau / 2 is dyadic too.
  CompressionConfig config = Threshold(0.75f);
  config.shake_up_every = 7;
  ThresholdEncoder encoder(n, config);
  std::vector<float> sum(n, 0.0f), received(n, 0.0f);
  std::vector<uint8_t> message;
  for (int step = 0; step < 200; ++step) {
    const std::vector<float> gradient = Dyadic(n, &rng);
    for (int64_t i = 0; i < n; ++i) sum[i] += gradient[i];
    (void)encoder.Encode(gradient.data(), &message);
    REQUIRE(DecodeThresholdAdd(message.data(), message.size(), n, 1.0f, received.data()).ok());
  }
  int64_t sent_somewhere = 0;
  for (int64_t i = 0; i < n; ++i) {
    REQUIRE(received[i] + encoder.residual()[i] == sum[i]);
    sent_somewhere += received[i] != 0.0f;
  }
  CHECK(sent_somewhere > n / 2);  // the check covered real traffic
}

TEST_CASE("residual bookkeeping with random floats and adaptive tau: equal to rounding") {
  std::mt19937 rng(3);
  const int64_t n = 4096;
  CompressionConfig config = Threshold(1e-2f, true);
  config.shake_up_every = 5;
  ThresholdEncoder encoder(n, config);
  std::vector<double> sum(n, 0.0), received(n, 0.0);
  std::vector<float> one(n);
  std::vector<uint8_t> message;
  for (int step = 0; step < 300; ++step) {
    const std::vector<float> gradient = Normal(n, 1e-3f, &rng);
    for (int64_t i = 0; i < n; ++i) sum[i] += gradient[i];
    std::fill(one.begin(), one.end(), 0.0f);
    (void)encoder.Encode(gradient.data(), &message);
    REQUIRE(DecodeThresholdAdd(message.data(), message.size(), n, 1.0f, one.data()).ok());
    for (int64_t i = 0; i < n; ++i) received[i] += one[i];
  }
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(received[i] + encoder.residual()[i] - sum[i]));
  }
  CHECK(worst < 1e-5);  // the sums are ~1e-2; float rounding over 300 steps
}

TEST_CASE("the adaptive threshold keeps the density in the target band") {
  std::mt19937 rng(4);
  const int64_t n = 20000;
  CompressionConfig config = Threshold(1.0f, true);  // far too high at first
  config.min_density = 1e-3;
  config.max_density = 1e-2;
  config.step = 0.1f;
  ThresholdEncoder encoder(n, config);
  std::vector<uint8_t> message;
  int in_band = 0, counted = 0;
  for (int step = 0; step < 600; ++step) {
    const std::vector<float> gradient = Normal(n, 1e-3f, &rng);
    const ThresholdEncodeStats stats = encoder.Encode(gradient.data(), &message);
    if (step < 100) continue;  // warm-up: tau walks down from 1.0
    ++counted;
    in_band += stats.density() >= config.min_density && stats.density() <= config.max_density;
  }
  CHECK(in_band >= counted * 95 / 100);
}

TEST_CASE("warm-up: the density per epoch falls exponentially to the band's top, then stops") {
  CompressionConfig config = Threshold(1e-3f, true);
  config.warmup_epochs = 4;
  config.warmup_density = 0.25;  // DGC's: 25%, 6.25%, 1.5625%, 0.39%, then about 0.1%
  config.max_density = 0.25 * 0.25 * 0.25 * 0.25 * 0.25;
  const double dgc[] = {0.25, 0.0625, 0.015625, 0.00390625};
  for (int epoch = 0; epoch < 4; ++epoch)
    CHECK(WarmupDensity(config, epoch) == doctest::Approx(dgc[epoch]));
  CHECK(WarmupDensity(config, 4) == 0);  // the band's adapting from here
  CHECK(WarmupDensity(config, 100) == 0);
  // The defaults: 75% to the default band's 1% over 4 epochs.
  CompressionConfig defaults;
  CHECK(defaults.warmup_epochs == 4);
  CHECK(WarmupDensity(defaults, 0) == doctest::Approx(0.75));
  CHECK(WarmupDensity(defaults, 2) == doctest::Approx(0.75 * std::sqrt(0.01 / 0.75)));
  CHECK(WarmupDensity(defaults, 4) == 0);
  config.warmup_epochs = 0;
  CHECK(WarmupDensity(config, 0) == 0);
}

// Every message of each epoch of a warm-up sends its epoch's share of the
// elements, whatever `threshold` says, and loses nothing; after the warm-up
// the adaptive threshold takes over from the last warm-up tau.
void CheckWarmup(int64_t n, float threshold, float sigma, bool exact) {
  std::mt19937 rng(8);
  CompressionConfig config = Threshold(threshold, true);
  config.warmup_epochs = 3;
  config.warmup_density = 0.2;
  config.min_density = 1e-3;
  config.max_density = 1e-2;
  ThresholdEncoder encoder(n, config);
  std::vector<double> sum(n, 0.0), received(n, 0.0);
  std::vector<float> one(n);
  std::vector<uint8_t> message;
  float last_warmup_tau = 0;
  for (int epoch = 0; epoch < 4; ++epoch) {
    encoder.SetEpoch(epoch);
    const double want = WarmupDensity(config, epoch);
    CHECK(encoder.warmup_density() == want);
    for (int step = 0; step < 5; ++step) {
      const std::vector<float> gradient = Normal(n, sigma, &rng);
      for (int64_t i = 0; i < n; ++i) sum[i] += gradient[i];
      const ThresholdEncodeStats stats = encoder.Encode(gradient.data(), &message);
      CHECK(stats.warmup == (epoch < 3));
      CHECK(ThresholdMessageSendsValues(message) == (epoch < 3));
      if (epoch < 3) {
        last_warmup_tau = stats.tau;
        const double expected = std::ceil(want * static_cast<double>(n));
        if (exact)
          CHECK(stats.sent == static_cast<int64_t>(expected));
        else
          CHECK(std::fabs(static_cast<double>(stats.sent) - expected) <= 0.05 * expected);
      } else if (step == 0) {
        CHECK(stats.tau == doctest::Approx(last_warmup_tau));  // adapting goes on from there
      }
      std::fill(one.begin(), one.end(), 0.0f);
      REQUIRE(DecodeThresholdAdd(message.data(), message.size(), n, 1.0f, one.data()).ok());
      for (int64_t i = 0; i < n; ++i) received[i] += one[i];
    }
  }
  double worst = 0, largest = 0;
  for (int64_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(received[i] + encoder.residual()[i] - sum[i]));
    largest = std::max(largest, std::fabs(sum[i]));
  }
  CHECK(worst < 1e-5 * std::max(1.0, largest));  // nothing lost: float rounding only
}

TEST_CASE("warm-up messages send their epoch's density whatever the threshold, losing nothing") {
  // Every element sampled: exactly ceil(density * n) sent (normal floats
  // have no ties); tau far too small and far too large alike.
  CheckWarmup(5000, 1e-6f, 1.0f, /*exact=*/true);
  CheckWarmup(5000, 1e6f, 1e-3f, /*exact=*/true);
  // A tensor past kWarmupSamples: tau from the sample, the density within 5%.
  CheckWarmup(3 * kWarmupSamples + 17, 1e-3f, 1.0f, /*exact=*/false);
}

TEST_CASE("warm-up: an all-zero gradient sends nothing and keeps tau; NaN does not break it") {
  CompressionConfig config = Threshold(0.5f, true);
  config.warmup_epochs = 2;
  config.warmup_density = 0.02;
  ThresholdEncoder encoder(100, config);
  std::vector<uint8_t> message;
  const std::vector<float> zeros(100, 0.0f);
  ThresholdEncodeStats stats = encoder.Encode(zeros.data(), &message);
  CHECK(stats.warmup);
  CHECK(stats.sent == 0);
  CHECK(stats.tau == 0.5f);
  std::vector<float> with_nan(100, 1.0f);
  with_nan[3] = std::nanf("");
  with_nan[50] = 2.0f;
  with_nan[60] = 3.0f;
  stats = encoder.Encode(with_nan.data(), &message);
  CHECK(stats.sent == 2);  // ceil(2% of 100): the 3.0 and the 2.0
  CHECK(stats.tau == 2.0f);
  // Not adaptive: after the warm-up tau is `threshold` again.
  config.adaptive = false;
  ThresholdEncoder fixed(100, config);
  (void)fixed.Encode(with_nan.data(), &message);
  fixed.SetEpoch(2);
  CHECK(fixed.Encode(zeros.data(), &message).tau == 0.5f);
}

TEST_CASE("the bitmap past the crossover, and no message over the bound, at any density") {
  std::mt19937 rng(5);
  const int64_t n = 10007;
  bool saw_sparse = false, saw_bitmap = false;
  for (int percent = 0; percent <= 100; percent += 2) {
    // Exactly `percent`% of the elements reach tau.
    std::vector<float> gradient(n, 0.0f);
    std::bernoulli_distribution pick(percent / 100.0);
    std::bernoulli_distribution negative(0.5);
    for (float& g : gradient) {
      if (pick(rng)) g = negative(rng) ? -1.0f : 1.0f;
    }
    ThresholdEncoder encoder(n, Threshold(1.0f));
    std::vector<uint8_t> message;
    const ThresholdEncodeStats stats = encoder.Encode(gradient.data(), &message);
    CHECK(message.size() <= ThresholdMessageBound(n));
    // The sparse size of this message: a varint per element sent.
    size_t sparse = kThresholdHeaderBytes;
    int64_t previous = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (gradient[i] == 0.0f) continue;
      uint32_t v = static_cast<uint32_t>(i - previous - 1) << 1;
      previous = i;
      do {
        ++sparse;
        v >>= 7;
      } while (v != 0);
    }
    const size_t bitmap_size = kThresholdHeaderBytes + (n + 3) / 4;
    const bool bitmap = sparse > bitmap_size;
    CHECK((stats.format == ThresholdFormat::kBitmap) == bitmap);
    CHECK(message.size() == (bitmap ? bitmap_size : sparse));
    saw_sparse |= !bitmap;
    saw_bitmap |= bitmap;
    std::vector<float> out(n, 0.0f);
    REQUIRE(DecodeThresholdAdd(message.data(), message.size(), n, 1.0f, out.data()).ok());
    CHECK(out == gradient);
  }
  CHECK(saw_sparse);
  CHECK(saw_bitmap);
}

TEST_CASE("shake-up: every shake_up_every messages, never above the threshold") {
  std::mt19937 rng(6);
  const int64_t n = 2000;
  CompressionConfig config = Threshold(1e-2f, true);
  config.shake_up_every = 4;
  ThresholdEncoder encoder(n, config);
  std::vector<uint8_t> message;
  for (int step = 1; step <= 40; ++step) {
    const float threshold = encoder.threshold();
    const std::vector<float> gradient = Normal(n, 1e-3f, &rng);
    const ThresholdEncodeStats stats = encoder.Encode(gradient.data(), &message);
    CHECK(stats.shake_up == (step % 4 == 0));
    CHECK(stats.tau <= threshold);
    if (stats.shake_up) CHECK(stats.tau == threshold * CompressionConfig::kShakeUpScale);
    float tau = 0;
    std::memcpy(&tau, message.data() + 8, 4);
    CHECK(tau == stats.tau);
  }
}

TEST_CASE("an all-zero stream keeps tau finite and positive") {
  CompressionConfig config = Threshold(1e-3f, true);
  config.step = 0.5f;
  ThresholdEncoder encoder(16, config);
  std::vector<float> zero(16, 0.0f);
  std::vector<uint8_t> message;
  for (int step = 0; step < 500; ++step) (void)encoder.Encode(zero.data(), &message);
  CHECK(encoder.threshold() > 0.0f);
  std::vector<float> out(16, 0.0f);
  CHECK(DecodeThresholdAdd(message.data(), message.size(), 16, 1.0f, out.data()).ok());
}

// A valid message to break: sparse (+1 at 1 and -1 at 5 of n = 64, 18
// bytes, well under the bound) or bitmap (n = 7).
std::vector<uint8_t> Sparse() {
  ThresholdEncoder encoder(64, Threshold(1.0f));
  std::vector<float> gradient(64, 0.0f);
  gradient[1] = 1;
  gradient[5] = -1;
  std::vector<uint8_t> message;
  (void)encoder.Encode(gradient.data(), &message);
  REQUIRE(message[0] == 1);
  return message;
}
std::vector<uint8_t> Bitmap() {
  ThresholdEncoder encoder(7, Threshold(1.0f));
  const std::vector<float> gradient = {1, -1, 1, -1, 1, -1, 1};
  std::vector<uint8_t> message;
  (void)encoder.Encode(gradient.data(), &message);
  REQUIRE(message[0] == 2);
  return message;
}

TEST_CASE("malformed messages are refused with what was wrong, and out is untouched") {
  CheckRefusals(
      {
          {"short header", false, [](auto* m) { m->resize(10); },
           "shorter than the 16-byte header"},
          {"format", false, [](auto* m) { (*m)[0] = 5; }, "format 5 is none of"},
          {"format 0", false, [](auto* m) { (*m)[0] = 0; }, "format 0 is none of"},
          {"version", false, [](auto* m) { (*m)[1] = 2; }, "version 2, expected 1"},
          {"reserved", false, [](auto* m) { (*m)[3] = 1; }, "reserved bytes are not 0"},
          {"n", false, [](auto* m) { SetU32(m, 4, 65); }, "for 65 elements, expected 64"},
          {"tau 0", false, [](auto* m) { SetF32(m, 8, 0.0f); },
           "tau 0.000000 is not finite and > 0"},
          {"tau < 0", false, [](auto* m) { SetF32(m, 8, -1.0f); }, "is not finite and > 0"},
          {"tau nan", false, [](auto* m) { SetF32(m, 8, std::nanf("")); }, "is not finite and > 0"},
          {"tau inf", false, [](auto* m) { SetF32(m, 8, INFINITY); }, "is not finite and > 0"},
          {"count > n", false, [](auto* m) { SetU32(m, 12, 65); },
           "count 65 is over the 64 elements"},
          {"count too big", false, [](auto* m) { SetU32(m, 12, 3); }, "cut short after 2 of 3"},
          {"count too small", false, [](auto* m) { SetU32(m, 12, 1); }, "1 bytes after the last"},
          {"trailing byte", false, [](auto* m) { m->push_back(0); },
           "1 bytes after the last index"},
          {"index out of range", false, [](auto* m) { (*m)[17] = 126; },
           "index 65 is out of range for 64 elements"},
          {"varint cut short", false, [](auto* m) { (*m)[17] = 0x81; }, "cut short after 1 of 2"},
          {"varint overlong", false,
           [](auto* m) {
             (*m)[16] = 0x82;
             (*m)[17] = 0x00;
           },
           "index 0 is not a well-formed varint"},
          {"bitmap short", true, [](auto* m) { m->pop_back(); }, "bitmap of 1 bytes, expected 2"},
          {"bitmap code 3", true, [](auto* m) { (*m)[16] = 0x03; }, "bitmap code 3 in byte 0"},
          {"bitmap count", true, [](auto* m) { SetU32(m, 12, 6); },
           "bitmap sends 7 elements, count"},
          {"bitmap padding", true, [](auto* m) { (*m)[17] |= 0x40; },
           "bitmap bits set past element 6"},
      },
      Sparse, 64, Bitmap, 7);
}

TEST_CASE("varints past 5 bytes or 32 bits are refused where the bound allows them") {
  // A large n leaves room under the bound for the varint to be read.
  const int64_t n = 1000;
  std::vector<uint8_t> message(16, 0);
  message[0] = 1;
  message[1] = 1;
  SetU32(&message, 4, n);
  SetF32(&message, 8, 1.0f);
  SetU32(&message, 12, 1);
  std::vector<uint8_t> six = message;
  for (int i = 0; i < 5; ++i) six.push_back(0x80);
  six.push_back(0x01);
  std::vector<uint8_t> wide = message;
  for (uint8_t b : {0xff, 0xff, 0xff, 0xff, 0x1f}) wide.push_back(b);
  for (const auto& bad : {six, wide}) {
    std::vector<float> out(n, 1.0f);
    CHECK(ErrorOf(bad, n, &out).find("index 0 is not a well-formed varint") != std::string::npos);
    CHECK(out == std::vector<float>(n, 1.0f));
  }
}

TEST_CASE("Restore brings back the residual, tau and the shake-up count") {
  std::mt19937 rng(7);
  const int64_t n = 300;
  CompressionConfig config = Threshold(1e-2f, true);
  config.shake_up_every = 3;
  ThresholdEncoder a(n, config);
  std::vector<uint8_t> message_a, message_b;
  for (int step = 0; step < 5; ++step) {
    const std::vector<float> gradient = Normal(n, 1e-2f, &rng);
    (void)a.Encode(gradient.data(), &message_a);
  }
  ThresholdEncoder b(n, config);
  b.Restore(a.residual(), a.threshold(), a.messages());
  CHECK(b.residual() == a.residual());
  CHECK(b.threshold() == a.threshold());
  CHECK(b.messages() == a.messages());
  for (int step = 0; step < 5; ++step) {
    const std::vector<float> gradient = Normal(n, 1e-2f, &rng);
    const ThresholdEncodeStats sa = a.Encode(gradient.data(), &message_a);
    const ThresholdEncodeStats sb = b.Encode(gradient.data(), &message_b);
    CHECK(message_a == message_b);
    CHECK(sa.shake_up == sb.shake_up);
  }
  // A tau a checkpoint could not have held restarts from the config's.
  ThresholdEncoder c(n, config);
  c.Restore(std::vector<float>(n, 0.25f), std::nanf(""), 2);
  CHECK(c.threshold() == 1e-2f);
  CHECK(c.messages() == 2);
  CHECK(c.residual()[n - 1] == 0.25f);
  c.Restore(std::vector<float>(n, 0.0f), -1.0f, 0);
  CHECK(c.threshold() == 1e-2f);
}

TEST_CASE("CompressionCounters add messages and keep tau's range") {
  CompressionCounters total;
  CHECK(total.density() == 0.0);
  ThresholdEncodeStats one;
  one.sent = 10;
  one.tau = 0.5f;
  one.bytes = 40;
  total.Add(one, 1000);
  one.tau = 0.25f;
  total.Add(one, 1000);
  CompressionCounters other;
  one.tau = 2.0f;
  other.Add(one, 2000);
  total.Add(other);
  total.Add(CompressionCounters{});  // empty: changes nothing
  CHECK(total.messages == 3);
  CHECK(total.elements == 4000);
  CHECK(total.sent == 30);
  CHECK(total.bytes == 120);
  CHECK(total.min_tau == 0.25f);
  CHECK(total.max_tau == 2.0f);
  CHECK(total.density() == doctest::Approx(30.0 / 4000));
}

}  // namespace
}  // namespace pstrain
