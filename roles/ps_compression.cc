#include "roles/ps_compression.h"

#include <algorithm>
#include <cassert>

namespace pstrain {

bool MomentumCorrected(const Config& config, const std::string& name) {
  return config.train.mode != UpdateMode::kAverage &&
         CompressionFor(config, name).type == CompressionType::kThreshold &&
         OptimizerFor(config, name).type == OptimizerType::kMomentum;
}

OptimizerConfig ServerOptimizerFor(const Config& config, const std::string& name) {
  OptimizerConfig o = OptimizerFor(config, name);
  if (MomentumCorrected(config, name)) o.type = OptimizerType::kSgd;
  return o;
}

PsCompression::PsCompression(const Config& config, const PartitionMap& map, bool encode)
    : tensors_(map.tensors().size()) {
  for (size_t t = 0; t < tensors_.size(); ++t) {
    Tensor& tensor = tensors_[t];
    tensor.elements = map.tensors()[t].elements;
    const CompressionConfig compression = CompressionFor(config, map.tensors()[t].name);
    if (!encode || compression.type != CompressionType::kThreshold) continue;
    for (const Partition& p : map.partitions(static_cast<int>(t))) {
      tensor.offsets.push_back(p.offset);
      tensor.encoders.push_back(std::make_unique<ThresholdEncoder>(p.elements, compression));
    }
    tensor.messages.resize(tensor.encoders.size());
    ++compressed_;
    if (!MomentumCorrected(config, map.tensors()[t].name)) continue;
    const OptimizerConfig o = OptimizerFor(config, map.tensors()[t].name);
    tensor.momentum.assign(static_cast<size_t>(tensor.elements), 0.0f);
    if (o.nesterov) tensor.nesterov_input.resize(static_cast<size_t>(tensor.elements));
    tensor.m = o.momentum;
    for (const Partition& p : map.partitions(static_cast<int>(t)))
      sent_scratch_.resize(std::max(sent_scratch_.size(), static_cast<size_t>(p.elements)), 0.0f);
  }
}

const std::vector<std::vector<uint8_t>>* PsCompression::Encode(int tensor, const float* gradient) {
  Tensor& t = tensors_[tensor];
  t.last_bytes = 0;
  const float* input = t.momentum.empty() ? gradient : Accumulate(t, gradient);
  for (size_t i = 0; i < t.encoders.size(); ++i) {
    ThresholdEncodeStats stats = t.encoders[i]->Encode(input + t.offsets[i], &t.messages[i]);
    counters_.Add(stats, t.encoders[i]->size());
    t.last_bytes += static_cast<int64_t>(stats.bytes);
    if (!t.momentum.empty())
      MaskSent(t.messages[i], t.encoders[i]->size(), t.momentum.data() + t.offsets[i]);
  }
  return &t.messages;
}

const float* PsCompression::Accumulate(Tensor& t, const float* gradient) {
  float* u = t.momentum.data();
  const float m = t.m;
  const size_t n = t.momentum.size();
  for (size_t i = 0; i < n; ++i) u[i] = m * u[i] + gradient[i];
  if (t.nesterov_input.empty()) return u;
  // As PyTorch's nesterov (optim/optimizer_kernel.h) and DGC's: the step
  // is g + m * u.
  float* input = t.nesterov_input.data();
  for (size_t i = 0; i < n; ++i) input[i] = gradient[i] + m * u[i];
  return input;
}

// The elements sent are found by decoding our own message: no change to
// the encoder, and exactly the set the server will apply (cost: the
// message's length, plus one pass over the partition, as the momentum
// update itself).
void PsCompression::MaskSent(const std::vector<uint8_t>& message, int64_t n, float* u) {
  float* sent = sent_scratch_.data();
  Status st = DecodeThresholdAdd(message.data(), message.size(), n, 1.0f, sent);
  assert(st.ok());  // our own encoder's message
  if (!st.ok()) return;
  // sent[i] is +-tau (never 0) where the message sent i.
  for (int64_t i = 0; i < n; ++i) {
    u[i] = sent[i] != 0.0f ? 0.0f : u[i];
    sent[i] = 0.0f;
  }
}

const float* PsCompression::momentum(int tensor) const {
  const Tensor& t = tensors_[tensor];
  return t.momentum.empty() ? nullptr : t.momentum.data();
}

void PsCompression::CountPush(int tensor) {
  const Tensor& t = tensors_[tensor];
  const int64_t dense = t.elements * static_cast<int64_t>(sizeof(float));
  dense_bytes_ += dense;
  pushed_bytes_ += t.encoders.empty() ? dense : t.last_bytes;
}

CompressionCounters PsCompression::counters() const {
  CompressionCounters c = counters_;
  bool first = true;
  for (const Tensor& t : tensors_) {
    for (const auto& e : t.encoders) {
      c.min_tau = first ? e->threshold() : std::min(c.min_tau, e->threshold());
      c.max_tau = first ? e->threshold() : std::max(c.max_tau, e->threshold());
      first = false;
    }
  }
  return c;
}

}  // namespace pstrain
