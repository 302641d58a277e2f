// bench compress: the threshold codec (optim/threshold_codec.h) on one core.
// A tensor of `elements` normally distributed floats is encoded at each
// target density: tau is the gradient's magnitude quantile that lets that
// share of the elements through, adaptive tau is off and the residual starts
// at zero each time, so every message sends the density asked for. Encode
// (residual update, selection, message) and decode (check, then add into a
// dense tensor) are timed apart; GB/s is of the dense input (4 bytes per
// element), the median over `repeats` runs after one untimed warm-up.
// memory_GBps is the reference: the same core adding the gradient into a
// residual and nothing else (the encoder's memory traffic without its
// message), so "at memory speed" can be read off each line. With `values`,
// the messages are the warm-up's (exact values, formats 3 and 4).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "optim/threshold_codec.h"
#include "src/app/bench/clock.h"
#include "src/app/bench/json.h"
#include "src/common/random.h"

namespace pstrain {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The magnitude that `density` of the elements reach or pass.
float QuantileTau(const std::vector<float>& gradient, double density) {
  std::vector<float> magnitude(gradient.size());
  std::transform(gradient.begin(), gradient.end(), magnitude.begin(),
                 [](float g) { return std::fabs(g); });
  const auto n = static_cast<int64_t>(magnitude.size());
  const int64_t rank = std::clamp<int64_t>(std::llround(density * n), 1, n);
  auto kth = magnitude.begin() + (n - rank);
  std::nth_element(magnitude.begin(), kth, magnitude.end());
  return std::max(*kth, std::numeric_limits<float>::min());
}

// GB/s of `gradient` through residual += gradient, the median of `repeats`.
double AddGBps(const std::vector<float>& gradient, int repeats) {
  std::vector<float> residual(gradient.size(), 0.0f);
  std::vector<double> seconds;
  for (int rep = 0; rep <= repeats; ++rep) {
    const auto start = BenchClock::now();
    for (size_t i = 0; i < gradient.size(); ++i) residual[i] += gradient[i];
    if (rep > 0) seconds.push_back(SecondsSince(start));
  }
  volatile float sink = residual[gradient.size() / 2];  // the sums are used
  (void)sink;
  return 4.0 * static_cast<double>(gradient.size()) / Median(seconds) / 1e9;
}

}  // namespace

Status RunCompressBench(int64_t elements, const std::vector<double>& densities, int repeats,
                        bool values) {
  Rng rng(1);
  std::vector<float> gradient(static_cast<size_t>(elements));
  for (float& g : gradient) g = static_cast<float>(rng.Normal() * 1e-3);
  const double dense_bytes = 4.0 * static_cast<double>(elements);
  const double memory_gbps = AddGBps(gradient, repeats);

  for (double density : densities) {
    CompressionConfig config;
    config.type = CompressionType::kThreshold;
    config.threshold = QuantileTau(gradient, density);
    config.adaptive = false;
    config.warmup_epochs = 0;  // the density asked for, at a fixed tau
    ThresholdEncoder encoder(elements, config);
    std::vector<uint8_t> message;
    message.reserve(ThresholdMessageBound(elements));
    std::vector<float> out(static_cast<size_t>(elements), 0.0f);
    std::vector<double> encode_s, decode_s;
    ThresholdEncodeStats stats;
    for (int rep = 0; rep <= repeats; ++rep) {
      encoder.Restore(std::vector<float>(static_cast<size_t>(elements), 0.0f), config.threshold, 0);
      auto start = BenchClock::now();
      stats = values ? encoder.EncodeValues(gradient.data(), config.threshold, &message)
                     : encoder.Encode(gradient.data(), &message);
      const double encode = SecondsSince(start);
      start = BenchClock::now();
      Status decoded =
          DecodeThresholdAdd(message.data(), message.size(), elements, 1.0f, out.data());
      const double decode = SecondsSince(start);
      if (!decoded.ok()) return decoded.WithContext("decoding the encoder's own message");
      if (rep == 0) continue;  // warm-up: pages touched, caches filled
      encode_s.push_back(encode);
      decode_s.push_back(decode);
    }
    Json line;
    line["bench"] = "compress";
    line["elements"] = elements;
    line["target_density"] = density;
    line["density"] = Rounded(stats.density(), 6);
    line["tau"] = stats.tau;
    line["format"] = ThresholdFormatName(stats.format);
    line["message_bytes"] = stats.bytes;
    line["dense_bytes"] = static_cast<int64_t>(dense_bytes);
    line["dense_over_message"] = Rounded(dense_bytes / static_cast<double>(stats.bytes), 1);
    line["encode_GBps"] = Rounded(dense_bytes / Median(encode_s) / 1e9, 2);
    line["decode_GBps"] = Rounded(dense_bytes / Median(decode_s) / 1e9, 2);
    line["memory_GBps"] = Rounded(memory_gbps, 2);
    PrintJsonLine(line);
  }
  return Status::OK();
}

}  // namespace pstrain
