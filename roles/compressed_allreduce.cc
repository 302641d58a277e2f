#include "roles/compressed_allreduce.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace pstrain {
namespace {

constexpr size_t kSizeBytes = 4;  // each message's u32 size in the packed bytes

void AppendU32(uint32_t v, std::vector<uint8_t>* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t ReadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace

void CompressedAllReduce::Add(Param* param, const CompressionConfig& config,
                              bool momentum_corrected, float m, bool nesterov) {
  Tensor t{param, std::make_unique<ThresholdEncoder>(param->grad.size(), config), {}, {}, m};
  if (momentum_corrected) {
    const size_t n = static_cast<size_t>(param->grad.size());
    t.momentum.assign(n, 0.0f);
    if (nesterov) t.nesterov_input.resize(n);
    sent_scratch_.resize(std::max(sent_scratch_.size(), n), 0.0f);
  }
  tensors_.push_back(std::move(t));
}

const float* CompressedAllReduce::momentum(size_t index) const {
  const Tensor& t = tensors_[index];
  return t.momentum.empty() ? nullptr : t.momentum.data();
}

std::vector<float> CompressedAllReduce::thresholds() const {
  std::vector<float> taus;
  for (const Tensor& t : tensors_) taus.push_back(t.encoder->threshold());
  return taus;
}

// Per tensor: f32 tau, i64 messages, then the residual's n floats and, when
// momentum-corrected, u's n floats.
constexpr size_t kStateHeader = sizeof(float) + sizeof(int64_t);

uint64_t CompressedAllReduce::StateBytes() const {
  uint64_t bytes = 0;
  for (const Tensor& t : tensors_)
    bytes += kStateHeader + sizeof(float) * static_cast<uint64_t>(t.param->grad.size()) *
                                (t.momentum.empty() ? 1 : 2);
  return bytes;
}

std::vector<uint8_t> CompressedAllReduce::PackState() const {
  std::vector<uint8_t> bytes(StateBytes());
  uint8_t* at = bytes.data();
  for (const Tensor& t : tensors_) {
    const float tau = t.encoder->threshold();
    const int64_t messages = t.encoder->messages();
    std::memcpy(at, &tau, sizeof(tau));
    std::memcpy(at + sizeof(tau), &messages, sizeof(messages));
    at += kStateHeader;
    const size_t n = t.encoder->residual().size() * sizeof(float);
    std::memcpy(at, t.encoder->residual().data(), n);
    at += n;
    if (t.momentum.empty()) continue;
    std::memcpy(at, t.momentum.data(), n);
    at += n;
  }
  return bytes;
}

Status CompressedAllReduce::UnpackState(const std::vector<uint8_t>& bytes) {
  if (bytes.size() != StateBytes())
    return InvalidArgument(
        fmt::format("the encoders' state has {} bytes, the compressed tensors "
                    "need {} (was the model changed?)",
                    bytes.size(), StateBytes()));
  const uint8_t* at = bytes.data();
  for (Tensor& t : tensors_) {
    float tau;
    int64_t messages;
    std::memcpy(&tau, at, sizeof(tau));
    std::memcpy(&messages, at + sizeof(tau), sizeof(messages));
    if (!std::isfinite(tau) || tau <= 0 || messages < 0)
      return InvalidArgument(
          fmt::format("the encoder state of {}: tau {} or message count {} is "
                      "not valid",
                      t.param->name, tau, messages));
    at += kStateHeader;
    const int64_t n = t.param->grad.size();
    const int64_t floats = t.momentum.empty() ? n : 2 * n;
    for (int64_t i = 0; i < floats; ++i, at += sizeof(float)) {
      float r;
      std::memcpy(&r, at, sizeof(r));
      if (!std::isfinite(r))
        return InvalidArgument(fmt::format("the encoder state of {}: {} {} is {}", t.param->name,
                                           i < n ? "residual" : "momentum", i % n, r));
    }
  }
  at = bytes.data();
  for (Tensor& t : tensors_) {
    float tau;
    int64_t messages;
    std::memcpy(&tau, at, sizeof(tau));
    std::memcpy(&messages, at + sizeof(tau), sizeof(messages));
    at += kStateHeader;
    std::vector<float> residual(static_cast<size_t>(t.param->grad.size()));
    std::memcpy(residual.data(), at, residual.size() * sizeof(float));
    at += residual.size() * sizeof(float);
    t.encoder->Restore(std::move(residual), tau, messages);
    if (t.momentum.empty()) continue;
    std::memcpy(t.momentum.data(), at, t.momentum.size() * sizeof(float));
    at += t.momentum.size() * sizeof(float);
  }
  return Status::OK();
}

uint64_t CompressedAllReduce::MaxPackedBytes() const {
  uint64_t bytes = 0;
  for (const Tensor& t : tensors_)
    bytes += kSizeBytes + ThresholdMessageBound(t.param->grad.size());
  return bytes;
}

Status CompressedAllReduce::Exchange(Collective& collective) {
  if (tensors_.empty()) return Status::OK();
  packed_.clear();
  for (Tensor& t : tensors_) {
    const int64_t n = t.param->grad.size();
    const float* input =
        t.momentum.empty()
            ? t.param->grad.ptr()
            : AccumulateMomentum(t.m, t.param->grad.ptr(), n, t.momentum.data(),
                                 t.nesterov_input.empty() ? nullptr : t.nesterov_input.data());
    const ThresholdEncodeStats stats = t.encoder->Encode(input, &message_);
    counters_.Add(stats, t.param->grad.size());
    // The elements sent are exactly the set every worker will add.
    if (!t.momentum.empty()) MaskSentMomentum(message_, n, t.momentum.data(), sent_scratch_.data());
    AppendU32(static_cast<uint32_t>(message_.size()), &packed_);
    packed_.insert(packed_.end(), message_.begin(), message_.end());
  }
  PSTRAIN_RETURN_IF_ERROR(collective.AllGatherBytes(packed_, &gathered_, MaxPackedBytes())
                              .WithContext("all-gathering the compressed gradients"));
  for (Tensor& t : tensors_) std::fill(t.param->grad.data.begin(), t.param->grad.data.end(), 0.0f);
  const float scale = 1.0f / static_cast<float>(collective.world());
  for (int r = 0; r < static_cast<int>(gathered_.size()); ++r)
    PSTRAIN_RETURN_IF_ERROR(DecodeFrom(r, gathered_[r], scale));
  return Status::OK();
}

Status CompressedAllReduce::DecodeFrom(int rank, const std::vector<uint8_t>& packed, float scale) {
  size_t at = 0;
  for (Tensor& t : tensors_) {
    const std::string& name = t.param->name;
    if (packed.size() - at < kSizeBytes)
      return InvalidArgument(
          fmt::format("worker {}'s compressed gradients end before {}'s message", rank, name));
    const uint32_t size = ReadU32(packed.data() + at);
    at += kSizeBytes;
    if (size > packed.size() - at)
      return InvalidArgument(fmt::format("worker {}'s message for {} claims {} bytes, {} are left",
                                         rank, name, size, packed.size() - at));
    Status decoded = DecodeThresholdAdd(packed.data() + at, size, t.param->grad.size(), scale,
                                        t.param->grad.ptr());
    if (!decoded.ok())
      return decoded.WithContext(fmt::format("worker {}'s message for {}", rank, name));
    at += size;
  }
  if (at != packed.size())
    return InvalidArgument(fmt::format(
        "worker {}'s compressed gradients have {} bytes past the end", rank, packed.size() - at));
  return Status::OK();
}

}  // namespace pstrain
