// Threshold encoding of updates (Strom 2015, "Scalable Distributed DNN
// Training Using Commodity GPU Cloud Computing"; Deeplearning4j's gradient
// sharing), used by both ways a worker sends less: workers' pushes to the servers
// and the all-gather of all-reduced (ps: false) weights.
//
// An encoder belongs to one worker and one tensor (or one partition of it).
// Each Encode() adds the new gradient to the encoder's residual; every
// element whose residual reaches the threshold tau in magnitude is sent as
// +tau or -tau and tau is taken off its residual; the rest stays for later
// messages. Nothing is lost, only delayed: over any number of messages, the
// sum of what was sent plus the residual equals the sum of the gradients
// (exactly: the same float operations in the same order, see the test).
//
// Refinements (all Strom's):
//   - adaptive tau: a message denser than the target band raises tau by
//     `step`, a sparser one lowers it, so the density stays in the band
//     (a shake-up message, dense on purpose, leaves tau as it is);
//   - bitmap: when a message is so dense that its indices would take more
//     bytes than 2 bits per element, it is written as a 2-bit bitmap, so no
//     message is ever larger than ThresholdMessageBound(n);
//   - shake-up: every `shake_up_every` messages one is encoded with
//     tau * CompressionConfig::kShakeUpScale (never above tau), sharing the
//     residual that sits just under tau.
// and one of Lin et al. 2018 ("Deep Gradient Compression", 3.4):
//   - warm-up: in the first `warmup_epochs` epochs a message sends a set
//     share of the elements, WarmupDensity (75% in the first epoch by
//     default, falling exponentially per epoch to the band's top): tau is
//     the magnitude of that quantile of residual + gradient (estimated from
//     a fixed sample of kWarmupSamples elements in a larger tensor), so
//     whatever `threshold` says, the first messages neither send each
//     element only a tiny +-tau (tau far too small: the update crawls
//     while adapting climbs 10% a message) nor hold back nearly every one
//     (far too large). A warm-up message sends the elements' own values
//     (formats 3 and 4) and zeroes their residual: +-tau at such a share
//     would clip the largest elements to the quantile's size. With
//     `adaptive`, tau then adapts from the last warm-up message's;
//     without, it is `threshold` again.
//
// Message layout (little-endian), 16-byte header then the body:
//   u8  format        1: sparse indices, 2: bitmap, 3: values sparse,
//                     4: values bitmap
//   u8  version       1
//   u16 reserved      0
//   u32 n             elements of the tensor the message is for
//   f32 tau           the value sent: +tau or -tau (finite, > 0); in
//                     formats 3 and 4, the least magnitude sent
//   u32 count         elements sent (<= n)
//   sparse: `count` LEB128 varints, each ((gap << 1) | sign) where gap is the
//           index minus the previous index minus 1 (the first: the index),
//           sign 1 for -tau; indices strictly increasing, < n
//   bitmap: ceil(n / 4) bytes, element i in bits 2*(i%4).. of byte i/4:
//           0 nothing, 1 +tau, 2 -tau (3 is invalid); exactly `count` set
//   values sparse and values bitmap: indices, then each element's own value
//           (optim/threshold_values.h)
//
// Decoding takes bytes from the wire: every field is checked before use
// and a bad message is an error naming what was wrong; nothing is written
// to `out` unless the whole message is valid.
//
// Threads: an encoder is used by one thread at a time; decoding is a pure
// function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/common/config/compression_config.h"
#include "src/common/status.h"

namespace pstrain {

enum class ThresholdFormat : uint8_t { kSparse = 1, kBitmap = 2, kValues = 3, kValuesBitmap = 4 };

// "sparse", "bitmap", "values", "values-bitmap": for logs and benches.
const char* ThresholdFormatName(ThresholdFormat format);

// True when `message` (one of an encoder's own) is in a values format: it
// sent its elements' whole accumulated values, not +-tau.
bool ThresholdMessageSendsValues(const std::vector<uint8_t>& message);

inline constexpr size_t kThresholdHeaderBytes = 16;

// The largest message for a tensor of n elements, in any format: header,
// presence bitmap and n values.
size_t ThresholdMessageBound(int64_t n);

// What one Encode() did, for the logs and the tests.
struct ThresholdEncodeStats {
  int64_t sent = 0;       // elements sent (+tau or -tau)
  float tau = 0;          // the threshold this message used
  bool shake_up = false;  // tau was the shake-up threshold
  bool warmup = false;    // tau was picked for the warm-up density
  ThresholdFormat format = ThresholdFormat::kSparse;
  size_t bytes = 0;        // the message's size
  int64_t elements = 0;    // n, the tensor's size
  double density() const;  // sent / n
};

// Totals over many messages (one worker's encoders), for the logs and the
// metrics file: what compression saved and where tau stands.
struct CompressionCounters {
  int64_t messages = 0;
  int64_t elements = 0;  // elements the messages covered (their dense size)
  int64_t sent = 0;      // elements sent
  int64_t bytes = 0;     // message bytes
  float min_tau = 0;     // over the messages added (0 before the first)
  float max_tau = 0;
  // Counts one message of `stats` for a tensor of `n` elements.
  void Add(const ThresholdEncodeStats& stats, int64_t n);
  void Add(const CompressionCounters& other);
  double density() const;  // sent / elements (0 when none)
};

// The share of elements warm-up asks of a message in `epoch` (0-based):
// d0 * (max_density / d0)^(epoch / warmup_epochs) with d0 = warmup_density,
// for epoch < warmup_epochs; 0 (no warm-up) from then on. The defaults give
// 2%, 1.68%, 1.41%, 1.19%, then the band [1e-4, 1e-2]; DGC's schedule is
// warmup_density 0.25 with a band topped at 0.25^5, about 0.1% (25%, 6.25%,
// 1.6%, 0.4%).
double WarmupDensity(const CompressionConfig& config, int64_t epoch);

// Elements whose |residual + gradient| a warm-up message's tau is taken
// from, at most: a larger tensor's tau is estimated from this many, spread
// over it, so warm-up costs one short nth_element per message.
inline constexpr int64_t kWarmupSamples = 1 << 16;

// The magnitude that the largest `share` (in (0, 1]) of |a[i] + b[i]|
// (|a[i]| when b is null), i < n, reach: the k-th largest, k = ceil(share
// * samples), from every element when n <= kWarmupSamples, else from
// kWarmupSamples spread over them. 0 when fewer than k are non-zero (NaN
// counts as 0). `sample` is scratch, kept to reuse its memory. Warm-up
// picks its tau so; so do compressed pulls (roles/server/pull_deltas.h).
float MagnitudeQuantile(const float* a, const float* b, int64_t n, double share,
                        std::vector<float>* sample);

class ThresholdEncoder {
 public:
  // `n` elements (> 0 and < 2^32, the header's u32); `config.type` must be
  // kThreshold.
  ThresholdEncoder(int64_t n, const CompressionConfig& config);

  int64_t size() const { return static_cast<int64_t>(residual_.size()); }
  // tau for the next message (before any shake-up; a warm-up message picks
  // its own).
  float threshold() const { return tau_; }

  // The epoch (0-based) the next messages are in; 0 until called. Sets the
  // warm-up density (WarmupDensity) the messages aim at.
  void SetEpoch(int64_t epoch);
  // The share warm-up asks of the next message; 0 when it is not warming up.
  double warmup_density() const { return warmup_density_; }
  // What has not been sent yet, per element.
  const std::vector<float>& residual() const { return residual_; }

  // Adds gradient[0..n) to the residual, then writes the message for this
  // step into *out (replacing its contents) and adapts tau.
  ThresholdEncodeStats Encode(const float* gradient, std::vector<uint8_t>* out);

  // One message in a values format at `tau` (finite and > 0), the caller's:
  // adds gradient[0..n) to the residual and sends every element whose
  // residual reached tau with that residual, which becomes 0. tau does not
  // adapt. Warm-up messages are these.
  ThresholdEncodeStats EncodeValues(const float* gradient, float tau, std::vector<uint8_t>* out);

  // Checkpoints: the residual and tau are the encoder's whole state (the
  // epoch is the trainer's, set again on resume).
  // `residual` must hold size() elements (the caller checks what it read;
  // a vector of another size is a bug and is not taken); a tau that is not
  // finite and > 0 restarts from config.threshold.
  void Restore(std::vector<float> residual, float tau, int64_t messages);
  int64_t messages() const { return messages_; }

  // The same state as bytes, for checkpoint files and peers (both
  // compressed paths keep it): f32 tau, i64 message count, then the residual's n
  // floats, StateBytes(n) in all, host byte order.
  static uint64_t StateBytes(int64_t n);
  void PackState(uint8_t* out) const;
  // Checks StateBytes(n) bytes read from a file or a peer (tau finite and
  // > 0, count >= 0, every residual element finite) and changes nothing;
  // the error says which value was wrong.
  static Status CheckState(const uint8_t* state, int64_t n);
  // Restores bytes CheckState accepted for n = size().
  void UnpackState(const uint8_t* state);

 private:
  CompressionConfig config_;
  std::vector<float> residual_;
  float tau_;
  int64_t messages_ = 0;  // encoded so far (shake-up counts them)
  double warmup_density_ = 0;
  // A +-tau message (formats 1 and 2) at `tau`.
  ThresholdEncodeStats EncodeSigns(const float* gradient, float tau, std::vector<uint8_t>* out);
  // The tau that sends warmup_density_ of residual + gradient.
  float WarmupThreshold(const float* gradient);
  std::vector<float> warmup_sample_;  // |residual + gradient| sampled
  // Where the varints wait when a message turns into a bitmap: allocated
  // once, so Encode() allocates nothing in steady state.
  std::vector<uint8_t> scratch_;
  std::vector<uint64_t> value_masks_;  // a values message's, per 64 elements
};

// ThresholdEncoder::EncodeValues on a residual of the caller's: adds
// gradient[0..n) to residual[0..n) and writes a values message (format 3 or
// 4) sending every element whose residual reached tau (clamped to a finite
// value > 0) with that residual, which becomes 0. `masks`, when given, is
// scratch kept by the caller to reuse its memory.
ThresholdEncodeStats EncodeThresholdValues(float* residual, const float* gradient, int64_t n,
                                           float tau, std::vector<uint8_t>* out,
                                           std::vector<uint64_t>* masks = nullptr);

// OK when the n floats at `bytes` (any alignment) are all finite, else
// InvalidArgument naming the first element that is not.
Status CheckFiniteFloats(const uint8_t* bytes, int64_t n);

// Checks `message` (for a tensor of `n` elements) and adds scale * (+-tau)
// to out[i] for every element it sends; `sent`, when given, receives the
// count. The error names what was wrong; `out` is untouched then.
Status DecodeThresholdAdd(const uint8_t* message, size_t size, int64_t n, float scale, float* out,
                          int64_t* sent = nullptr);

}  // namespace pstrain
