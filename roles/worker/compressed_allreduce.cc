#include "roles/worker/compressed_allreduce.h"

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

void CompressedAllReduce::SetEpoch(int64_t epoch) {
  for (Tensor& t : tensors_) t.encoder->SetEpoch(epoch);
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

// Per tensor: the encoder's state (ThresholdEncoder::PackState) and, when
// momentum-corrected, u's n floats.
uint64_t CompressedAllReduce::StateBytes() const {
  uint64_t bytes = 0;
  for (const Tensor& t : tensors_) {
    const int64_t n = t.param->grad.size();
    bytes += ThresholdEncoder::StateBytes(n) + sizeof(float) * t.momentum.size();
  }
  return bytes;
}

std::vector<uint8_t> CompressedAllReduce::PackState() const {
  std::vector<uint8_t> bytes(StateBytes());
  uint8_t* at = bytes.data();
  for (const Tensor& t : tensors_) {
    t.encoder->PackState(at);
    at += ThresholdEncoder::StateBytes(t.encoder->size());
    std::memcpy(at, t.momentum.data(), t.momentum.size() * sizeof(float));
    at += t.momentum.size() * sizeof(float);
  }
  return bytes;
}

Status CompressedAllReduce::UnpackState(const std::vector<uint8_t>& bytes) {
  if (bytes.size() != StateBytes())
    return InvalidArgument(
        fmt::format("the encoders' state has {} bytes, the compressed tensors "
                    "need {} (was the model changed?)",
                    bytes.size(), StateBytes()));
  // Everything is checked before anything is restored.
  for (int pass = 0; pass < 2; ++pass) {
    const uint8_t* at = bytes.data();
    for (Tensor& t : tensors_) {
      const int64_t n = t.encoder->size();
      const uint8_t* momentum = at + ThresholdEncoder::StateBytes(n);
      if (pass == 0) {
        PSTRAIN_RETURN_IF_ERROR(ThresholdEncoder::CheckState(at, n).WithContext(t.param->name));
        PSTRAIN_RETURN_IF_ERROR(CheckFiniteFloats(momentum, static_cast<int64_t>(t.momentum.size()))
                                    .WithContext(t.param->name + " momentum"));
      } else {
        t.encoder->UnpackState(at);
        std::memcpy(t.momentum.data(), momentum, t.momentum.size() * sizeof(float));
      }
      at = momentum + t.momentum.size() * sizeof(float);
    }
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
