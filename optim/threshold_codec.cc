#include "optim/threshold_codec.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "optim/threshold_values.h"
#include "optim/threshold_wire.h"

namespace pstrain {
namespace {

using threshold_wire::Bad;
using threshold_wire::GetU32;
using threshold_wire::GetVarint;
using threshold_wire::kMaxVarint;
using threshold_wire::PutU32;
using threshold_wire::PutVarint;
using threshold_wire::ReadIndex;

constexpr uint8_t kVersion = 1;
// Elements per block of the encoder's pass: one 64-bit mask per sign, so the
// residual update vectorizes and a block with nothing to send (most of them
// at low density) costs that update alone.
constexpr int64_t kBlock = 64;
size_t BitmapBytes(int64_t n) { return static_cast<size_t>((n + 3) / 4); }

// Bits 0..31 of x moved to the even bits (bit k to bit 2k): with the signs
// on the odd bits, 32 elements' 2-bit codes in bitmap order.
uint64_t SpreadEven(uint64_t x) {
  x &= 0xffffffffu;
  x = (x | x << 16) & 0x0000ffff0000ffffu;
  x = (x | x << 8) & 0x00ff00ff00ff00ffu;
  x = (x | x << 4) & 0x0f0f0f0f0f0f0f0fu;
  x = (x | x << 2) & 0x3333333333333333u;
  x = (x | x << 1) & 0x5555555555555555u;
  return x;
}

// Where the elements of one message go while the encoder's single pass runs,
// a block of up to 64 elements at a time (bit j of `plus` / `minus`: element
// base + j is sent as +tau / -tau): varints, until they would take more
// bytes than the bitmap; then the varints written so far become a bitmap
// and the rest of the pass sets bits, 32 elements per 64-bit word.
class BodyWriter {
 public:
  // `body` holds BitmapBytes(n) + kMaxVarint bytes; `scratch` as many.
  BodyWriter(uint8_t* body, int64_t n, uint8_t* scratch)
      : body_(body), n_(n), bitmap_bytes_(BitmapBytes(n)), scratch_(scratch) {}

  void EmitBlock(int64_t base, uint64_t plus, uint64_t minus) {
    if (bitmap_) return SetBits(base, plus, minus);
    for (uint64_t hits = plus | minus; hits != 0;) {
      const int j = __builtin_ctzll(hits);
      hits &= hits - 1;
      const auto gap = static_cast<uint32_t>(base + j - previous_ - 1);
      previous_ = base + j;
      pos_ += PutVarint(body_ + pos_, gap << 1 | static_cast<uint32_t>(minus >> j & 1));
      if (pos_ > bitmap_bytes_) {
        ToBitmap();
        return SetBits(base, plus & hits, minus & hits);
      }
    }
  }

  bool bitmap() const { return bitmap_; }
  size_t bytes() const { return bitmap_ ? bitmap_bytes_ : pos_; }

 private:
  // `base` is a multiple of 64, so its codes start at byte base / 4.
  void SetBits(int64_t base, uint64_t plus, uint64_t minus) {
    for (int half = 0; half < 2; ++half) {
      const uint64_t word = SpreadEven(plus >> (32 * half)) | SpreadEven(minus >> (32 * half)) << 1;
      if (word == 0) continue;
      const int64_t first = base + 32 * half;  // its element
      uint8_t* at = body_ + first / 4;
      const int64_t bytes = std::min<int64_t>(8, (n_ - first + 3) / 4);
      for (int64_t k = 0; k < bytes; ++k) at[k] |= static_cast<uint8_t>(word >> (8 * k));
    }
  }

  // Once per message at most: the varints move to scratch and come back as
  // bits (they cannot be converted in place: an element's bits may land on
  // varints not read yet).
  void ToBitmap() {
    std::memcpy(scratch_, body_, pos_);
    std::memset(body_, 0, bitmap_bytes_);
    const uint8_t* p = scratch_;
    const uint8_t* end = scratch_ + pos_;
    int64_t index = -1;
    bitmap_ = true;
    while (p < end) {
      uint32_t v = 0;
      GetVarint(&p, end, &v);  // written just above: always well-formed
      index += static_cast<int64_t>(v >> 1) + 1;
      body_[index >> 2] |= static_cast<uint8_t>((1 + (v & 1)) << (2 * (index & 3)));
    }
  }

  uint8_t* body_;
  int64_t n_;
  size_t bitmap_bytes_;
  uint8_t* scratch_;
  size_t pos_ = 0;
  int64_t previous_ = -1;
  bool bitmap_ = false;
};

// tau stays a normal positive float whatever the stream does (an all-zero
// gradient lowers it every message): a message's tau must be finite and > 0.
float ClampTau(float tau) {
  return std::clamp(tau, std::numeric_limits<float>::min(), std::numeric_limits<float>::max());
}

// Checks a sparse body (then `out` is null) or applies it. The second call
// runs only after the first passed, so it cannot fail halfway.
Status WalkSparse(const uint8_t* body, const uint8_t* end, uint32_t count, int64_t n, float value,
                  float* out) {
  const uint8_t* p = body;
  int64_t index = -1;
  for (uint32_t k = 0; k < count; ++k) {
    uint32_t v = 0;
    Status read = ReadIndex(&p, end, k, count, n, /*flag_bits=*/1, &index, &v);
    if (!read.ok()) return read;
    if (out != nullptr) out[index] += (v & 1) ? -value : value;
  }
  if (p != end) return Bad(std::to_string(end - p) + " bytes after the last index");
  return Status::OK();
}

// Counts the elements a bitmap sends, refusing code 3 and set padding bits;
// eight bytes (32 codes) at a time.
Status CheckBitmap(const uint8_t* body, int64_t n, uint32_t count) {
  constexpr uint64_t kLow = 0x5555555555555555u;  // the low bit of each code
  const size_t bytes = BitmapBytes(n);
  int64_t set = 0;
  for (size_t b = 0; b < bytes;) {
    uint64_t word = 0;
    const size_t take = std::min<size_t>(8, bytes - b);
    for (size_t k = 0; k < take; ++k) word |= uint64_t{body[b + k]} << (8 * k);
    if ((word & (word >> 1) & kLow) != 0) {
      for (size_t k = 0;; ++k) {
        if ((body[b + k] & (body[b + k] >> 1) & 0x55u) != 0) {
          return Bad("bitmap code 3 in byte " + std::to_string(b + k));
        }
      }
    }
    set += __builtin_popcountll((word | (word >> 1)) & kLow);
    b += take;
  }
  const int tail = static_cast<int>(n % 4);
  if (tail != 0 && (body[bytes - 1] >> (2 * tail)) != 0) {
    return Bad("bitmap bits set past element " + std::to_string(n - 1));
  }
  if (set != count) {
    return Bad("bitmap sends " + std::to_string(set) + " elements, count says " +
               std::to_string(count));
  }
  return Status::OK();
}

// Branch-free per element (a dense bitmap's codes are random): each code
// picks what to add, -0.0f for none (x + -0.0f is x for every x, -0.0f
// included, so unsent elements keep their bits); a zero byte is skipped.
void ApplyBitmap(const uint8_t* body, int64_t n, float value, float* out) {
  const float add[4] = {-0.0f, value, -value, -0.0f};  // 3 was refused
  const int64_t full = n / 4;
  for (int64_t b = 0; b < full; ++b) {
    const unsigned byte = body[b];
    if (byte == 0) continue;
    float* o = out + 4 * b;
    for (int k = 0; k < 4; ++k) o[k] += add[byte >> (2 * k) & 3];
  }
  for (int64_t i = 4 * full; i < n; ++i) out[i] += add[body[i / 4] >> (2 * (i % 4)) & 3];
}

}  // namespace

size_t ThresholdMessageBound(int64_t n) {
  return kThresholdHeaderBytes + std::max(BitmapBytes(n), threshold_values::BodyBound(n));
}

const char* ThresholdFormatName(ThresholdFormat format) {
  switch (format) {
    case ThresholdFormat::kSparse:
      return "sparse";
    case ThresholdFormat::kBitmap:
      return "bitmap";
    case ThresholdFormat::kValues:
      return "values";
    case ThresholdFormat::kValuesBitmap:
      return "values-bitmap";
  }
  return "unknown";
}

bool ThresholdMessageSendsValues(const std::vector<uint8_t>& message) {
  return !message.empty() && (message[0] == static_cast<uint8_t>(ThresholdFormat::kValues) ||
                              message[0] == static_cast<uint8_t>(ThresholdFormat::kValuesBitmap));
}

double ThresholdEncodeStats::density() const {
  return elements > 0 ? static_cast<double>(sent) / static_cast<double>(elements) : 0.0;
}

void CompressionCounters::Add(const ThresholdEncodeStats& stats, int64_t n) {
  CompressionCounters one;
  one.messages = 1;
  one.elements = n;
  one.sent = stats.sent;
  one.bytes = static_cast<int64_t>(stats.bytes);
  one.min_tau = one.max_tau = stats.tau;
  Add(one);
}

void CompressionCounters::Add(const CompressionCounters& other) {
  if (other.messages == 0) return;
  if (messages == 0) {
    min_tau = other.min_tau;
    max_tau = other.max_tau;
  } else {
    min_tau = std::min(min_tau, other.min_tau);
    max_tau = std::max(max_tau, other.max_tau);
  }
  messages += other.messages;
  elements += other.elements;
  sent += other.sent;
  bytes += other.bytes;
}

double CompressionCounters::density() const {
  return elements > 0 ? static_cast<double>(sent) / static_cast<double>(elements) : 0.0;
}

double WarmupDensity(const CompressionConfig& config, int64_t epoch) {
  const double start = config.warmup_density;
  if (epoch < 0 || epoch >= config.warmup_epochs) return 0;
  const double fraction = static_cast<double>(epoch) / static_cast<double>(config.warmup_epochs);
  return start * std::pow(config.max_density / start, fraction);
}

ThresholdEncoder::ThresholdEncoder(int64_t n, const CompressionConfig& config)
    : config_(config), residual_(static_cast<size_t>(n), 0.0f), tau_(ClampTau(config.threshold)) {
  assert(n > 0 && n <= std::numeric_limits<uint32_t>::max());
  assert(config.type == CompressionType::kThreshold);
  SetEpoch(0);
}

void ThresholdEncoder::SetEpoch(int64_t epoch) {
  warmup_density_ = WarmupDensity(config_, epoch);
  if (warmup_density_ == 0) {
    warmup_sample_.clear();
    warmup_sample_.shrink_to_fit();
  }
}

float MagnitudeQuantile(const float* a, const float* b, int64_t n, double share,
                        std::vector<float>* sample) {
  const int64_t samples = std::min(n, kWarmupSamples);
  sample->resize(static_cast<size_t>(samples));
  // The same float sum the encoding pass makes, so that with every element
  // sampled exactly the chosen ones reach the result. NaN counts as 0 (the
  // order must be total).
  auto magnitude = [&](int64_t i) {
    const float x = b != nullptr ? a[i] + b[i] : a[i];
    const float m = std::fabs(x);
    return m > 0 ? m : 0.0f;
  };
  float* s = sample->data();
  if (samples == n) {
    for (int64_t i = 0; i < n; ++i) s[i] = magnitude(i);
  } else {
    // A Weyl sequence (j times the golden ratio, mod 1): spread over the
    // tensor without the period a fixed stride would share with its rows.
    constexpr double kGolden = 0.6180339887498949;
    for (int64_t j = 0; j < samples; ++j) {
      const double at = std::fmod(static_cast<double>(j) * kGolden, 1.0);
      s[j] = magnitude(std::min(n - 1, static_cast<int64_t>(at * static_cast<double>(n))));
    }
  }
  const auto k = std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(share * static_cast<double>(samples))), 1, samples);
  auto kth = sample->begin() + (k - 1);
  std::nth_element(sample->begin(), kth, sample->end(), std::greater<float>());
  return *kth;
}

float ThresholdEncoder::WarmupThreshold(const float* gradient) {
  const float q =
      MagnitudeQuantile(residual_.data(), gradient, size(), warmup_density_, &warmup_sample_);
  // Fewer than k elements are non-zero: send those, at the current tau.
  return q > 0 ? ClampTau(q) : tau_;
}

ThresholdEncodeStats ThresholdEncoder::Encode(const float* gradient, std::vector<uint8_t>* out) {
  ++messages_;
  const bool warmup = warmup_density_ > 0;
  if (warmup) {
    // Exact values (optim/threshold_values.h): at a warm-up's share of the
    // elements, +-tau would clip the largest to the quantile's size.
    ThresholdEncodeStats stats = EncodeValues(gradient, WarmupThreshold(gradient), out);
    stats.warmup = true;
    // A warm-up message's tau fits the data: adapting goes on from there.
    if (config_.adaptive) tau_ = stats.tau;
    return stats;
  }
  const bool shake_up = config_.shake_up_every > 0 && messages_ % config_.shake_up_every == 0;
  ThresholdEncodeStats stats =
      EncodeSigns(gradient, shake_up ? tau_ * CompressionConfig::kShakeUpScale : tau_, out);
  stats.shake_up = shake_up;
  // A shake-up message is denser on purpose; it says nothing about tau.
  if (config_.adaptive && !shake_up) {
    const double density = stats.density();
    if (density < config_.min_density) tau_ = ClampTau(tau_ * (1.0f - config_.step));
    if (density > config_.max_density) tau_ = ClampTau(tau_ * (1.0f + config_.step));
  }
  return stats;
}

namespace {

void WriteHeader(ThresholdFormat format, int64_t n, float tau, uint32_t count, uint8_t* h) {
  h[0] = static_cast<uint8_t>(format);
  h[1] = kVersion;
  h[2] = h[3] = 0;
  PutU32(h + 4, static_cast<uint32_t>(n));
  uint32_t tau_bits = 0;
  std::memcpy(&tau_bits, &tau, sizeof tau);
  PutU32(h + 8, tau_bits);
  PutU32(h + 12, count);
}

}  // namespace

ThresholdEncodeStats EncodeThresholdValues(float* residual, const float* gradient, int64_t n,
                                           float tau, std::vector<uint8_t>* out,
                                           std::vector<uint64_t>* masks) {
  std::vector<uint64_t> own;
  if (masks == nullptr) masks = &own;
  ThresholdEncodeStats stats;
  stats.elements = n;
  stats.tau = tau = ClampTau(tau);
  out->resize(kThresholdHeaderBytes + threshold_values::BodyBound(n));
  uint32_t count = 0;
  bool bitmap = false;
  const size_t body = threshold_values::Encode(
      residual, gradient, n, tau, out->data() + kThresholdHeaderBytes, &count, &bitmap, masks);
  stats.format = bitmap ? ThresholdFormat::kValuesBitmap : ThresholdFormat::kValues;
  WriteHeader(stats.format, n, tau, count, out->data());
  out->resize(kThresholdHeaderBytes + body);
  stats.sent = count;
  stats.bytes = out->size();
  return stats;
}

ThresholdEncodeStats ThresholdEncoder::EncodeValues(const float* gradient, float tau,
                                                    std::vector<uint8_t>* out) {
  return EncodeThresholdValues(residual_.data(), gradient, size(), tau, out, &value_masks_);
}

ThresholdEncodeStats ThresholdEncoder::EncodeSigns(const float* gradient, float tau,
                                                   std::vector<uint8_t>* out) {
  const int64_t n = size();
  ThresholdEncodeStats stats;
  stats.elements = n;
  stats.tau = tau;

  // Room for the bitmap plus one varint past it (the one that tips the
  // message over to the bitmap). The caller's vector keeps its capacity, so
  // steady state allocates nothing.
  const size_t room = BitmapBytes(n) + kMaxVarint;
  out->resize(kThresholdHeaderBytes + room);
  if (scratch_.size() < room) scratch_.resize(room);
  BodyWriter writer(out->data() + kThresholdHeaderBytes, n, scratch_.data());

  // The one pass: add the gradient to the residual and send what reached
  // tau. Per block of 64, the residual update and two bit masks (elements
  // sent as +tau, as -tau) in a loop that vectorizes; the writer then costs
  // per element sent, with no branch on the data element by element.
  // r - tau and r + tau are the only float operations on a sent element.
  float* r = residual_.data();
  int64_t sent = 0;
  for (int64_t base = 0; base < n; base += kBlock) {
    const int64_t len = std::min(kBlock, n - base);
    float* rb = r + base;
    const float* gb = gradient + base;
    uint64_t plus = 0, minus = 0;
    for (int64_t j = 0; j < len; ++j) {
      const float v = rb[j] + gb[j];
      const bool p = v >= tau;
      const bool m = v <= -tau;
      rb[j] = p ? v - tau : (m ? v + tau : v);
      plus |= uint64_t{p} << j;
      minus |= uint64_t{m} << j;
    }
    if ((plus | minus) == 0) continue;
    sent += __builtin_popcountll(plus) + __builtin_popcountll(minus);
    writer.EmitBlock(base, plus, minus);
  }

  stats.format = writer.bitmap() ? ThresholdFormat::kBitmap : ThresholdFormat::kSparse;
  WriteHeader(stats.format, n, tau, static_cast<uint32_t>(sent), out->data());
  out->resize(kThresholdHeaderBytes + writer.bytes());
  stats.sent = sent;
  stats.bytes = out->size();
  return stats;
}

void ThresholdEncoder::Restore(std::vector<float> residual, float tau, int64_t messages) {
  assert(residual.size() == residual_.size());
  if (residual.size() == residual_.size()) residual_ = std::move(residual);
  tau_ = std::isfinite(tau) && tau > 0 ? ClampTau(tau) : ClampTau(config_.threshold);
  messages_ = std::max<int64_t>(0, messages);
}

constexpr uint64_t kStateHeaderBytes = sizeof(float) + sizeof(int64_t);

uint64_t ThresholdEncoder::StateBytes(int64_t n) {
  return kStateHeaderBytes + sizeof(float) * static_cast<uint64_t>(n);
}

void ThresholdEncoder::PackState(uint8_t* out) const {
  std::memcpy(out, &tau_, sizeof(tau_));
  std::memcpy(out + sizeof(tau_), &messages_, sizeof(messages_));
  std::memcpy(out + kStateHeaderBytes, residual_.data(), residual_.size() * sizeof(float));
}

Status ThresholdEncoder::CheckState(const uint8_t* state, int64_t n) {
  float tau;
  int64_t messages;
  std::memcpy(&tau, state, sizeof(tau));
  std::memcpy(&messages, state + sizeof(tau), sizeof(messages));
  if (!std::isfinite(tau) || tau <= 0)
    return InvalidArgument("encoder state: threshold " + std::to_string(tau) + " is not > 0");
  if (messages < 0)
    return InvalidArgument("encoder state: message count " + std::to_string(messages) +
                           " is negative");
  return CheckFiniteFloats(state + kStateHeaderBytes, n).WithContext("encoder residual");
}

void ThresholdEncoder::UnpackState(const uint8_t* state) {
  std::memcpy(&tau_, state, sizeof(tau_));
  std::memcpy(&messages_, state + sizeof(tau_), sizeof(messages_));
  std::memcpy(residual_.data(), state + kStateHeaderBytes, residual_.size() * sizeof(float));
  tau_ = ClampTau(tau_);
}

Status CheckFiniteFloats(const uint8_t* bytes, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, bytes + i * sizeof(float), sizeof(v));
    if (!std::isfinite(v))
      return InvalidArgument("element " + std::to_string(i) + " is " + std::to_string(v));
  }
  return Status::OK();
}

Status DecodeThresholdAdd(const uint8_t* message, size_t size, int64_t n, float scale, float* out,
                          int64_t* sent) {
  if (n <= 0 || n > std::numeric_limits<uint32_t>::max()) {
    return Bad("expected size " + std::to_string(n) + " is not in [1, 2^32)");
  }
  if (size < kThresholdHeaderBytes) {
    return Bad(std::to_string(size) + " bytes, shorter than the 16-byte header");
  }
  if (size > ThresholdMessageBound(n)) {
    return Bad(std::to_string(size) + " bytes, over the bound " +
               std::to_string(ThresholdMessageBound(n)) + " for " + std::to_string(n) +
               " elements");
  }
  const uint8_t format = message[0];
  if (format < static_cast<uint8_t>(ThresholdFormat::kSparse) ||
      format > static_cast<uint8_t>(ThresholdFormat::kValuesBitmap)) {
    return Bad("format " + std::to_string(format) +
               " is none of 1 (sparse), 2 (bitmap), 3 (values), 4 (values bitmap)");
  }
  if (message[1] != kVersion) {
    return Bad("version " + std::to_string(message[1]) + ", expected 1");
  }
  if (message[2] != 0 || message[3] != 0) return Bad("reserved bytes are not 0");
  const uint32_t message_n = GetU32(message + 4);
  if (message_n != n) {
    return Bad("for " + std::to_string(message_n) + " elements, expected " + std::to_string(n));
  }
  const uint32_t tau_bits = GetU32(message + 8);
  float tau = 0;
  std::memcpy(&tau, &tau_bits, sizeof tau);
  if (!std::isfinite(tau) || !(tau > 0)) {
    return Bad("tau " + std::to_string(tau) + " is not finite and > 0");
  }
  const uint32_t count = GetU32(message + 12);
  if (count > n) {
    return Bad("count " + std::to_string(count) + " is over the " + std::to_string(n) +
               " elements");
  }
  const uint8_t* body = message + kThresholdHeaderBytes;
  const uint8_t* end = message + size;
  const float value = scale * tau;
  if (format >= static_cast<uint8_t>(ThresholdFormat::kValues)) {
    Status checked = threshold_values::Check(format, body, end, count, n, tau);
    if (!checked.ok()) return checked;
    threshold_values::Apply(format, body, end, count, n, scale, out);
  } else if (format == static_cast<uint8_t>(ThresholdFormat::kSparse)) {
    Status checked = WalkSparse(body, end, count, n, value, nullptr);
    if (!checked.ok()) return checked;
    WalkSparse(body, end, count, n, value, out).IgnoreError();  // checked just above
  } else {
    if (static_cast<size_t>(end - body) != BitmapBytes(n)) {
      return Bad("bitmap of " + std::to_string(end - body) + " bytes, expected " +
                 std::to_string(BitmapBytes(n)));
    }
    Status checked = CheckBitmap(body, n, count);
    if (!checked.ok()) return checked;
    ApplyBitmap(body, n, value, out);
  }
  if (sent != nullptr) *sent = count;
  return Status::OK();
}

}  // namespace pstrain
