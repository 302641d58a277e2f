#include "roles/worker/ps_compression.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstring>

namespace pstrain {

PsCompression::PsCompression(const Config& config, const PartitionMap& map, bool encode)
    : tensors_(map.tensors().size()) {
  for (size_t t = 0; t < tensors_.size(); ++t) {
    Tensor& tensor = tensors_[t];
    tensor.name = map.tensors()[t].name;
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
  const float* input =
      t.momentum.empty()
          ? gradient
          : AccumulateMomentum(t.m, gradient, t.elements, t.momentum.data(),
                               t.nesterov_input.empty() ? nullptr : t.nesterov_input.data());
  for (size_t i = 0; i < t.encoders.size(); ++i) {
    ThresholdEncodeStats stats = t.encoders[i]->Encode(input + t.offsets[i], &t.messages[i]);
    counters_.Add(stats, t.encoders[i]->size());
    t.last_bytes += static_cast<int64_t>(stats.bytes);
    if (!t.momentum.empty())
      MaskSentMomentum(t.messages[i], t.encoders[i]->size(), t.momentum.data() + t.offsets[i],
                       sent_scratch_.data());
  }
  return &t.messages;
}

const float* PsCompression::momentum(int tensor) const {
  const Tensor& t = tensors_[tensor];
  return t.momentum.empty() ? nullptr : t.momentum.data();
}

void PsCompression::SetEpoch(int64_t epoch) {
  for (Tensor& t : tensors_)
    for (auto& encoder : t.encoders) encoder->SetEpoch(epoch);
}

void PsCompression::CountPush(int tensor) {
  const Tensor& t = tensors_[tensor];
  const int64_t dense = t.elements * static_cast<int64_t>(sizeof(float));
  dense_bytes_ += dense;
  pushed_bytes_ += t.encoders.empty() ? dense : t.last_bytes;
}

namespace {

std::string EncoderSection(const std::string& tensor, size_t partition) {
  return fmt::format("encoder/{}/{}", tensor, partition);
}
std::string MomentumSection(const std::string& tensor) { return "momentum/" + tensor; }

}  // namespace

std::vector<Section> PsCompression::State() const {
  std::vector<Section> state;
  for (const Tensor& t : tensors_) {
    for (size_t i = 0; i < t.encoders.size(); ++i) {
      Section s{EncoderSection(t.name, i),
                std::vector<uint8_t>(ThresholdEncoder::StateBytes(t.encoders[i]->size()))};
      t.encoders[i]->PackState(s.bytes.data());
      state.push_back(std::move(s));
    }
    if (t.momentum.empty()) continue;
    const auto* u = reinterpret_cast<const uint8_t*>(t.momentum.data());
    state.push_back({MomentumSection(t.name), {u, u + t.momentum.size() * sizeof(float)}});
  }
  return state;
}

Status PsCompression::Restore(const SectionsByName& sections) {
  // Pass 0 checks every section, pass 1 restores: all or nothing.
  for (int pass = 0; pass < 2; ++pass) {
    for (Tensor& t : tensors_) {
      for (size_t i = 0; i < t.encoders.size(); ++i) {
        ThresholdEncoder& encoder = *t.encoders[i];
        const std::string name = EncoderSection(t.name, i);
        auto bytes = FindSection(sections, name, ThresholdEncoder::StateBytes(encoder.size()));
        if (!bytes.ok()) return bytes.status();
        if (pass == 0)
          PSTRAIN_RETURN_IF_ERROR(
              ThresholdEncoder::CheckState((*bytes)->data(), encoder.size()).WithContext(name));
        else
          encoder.UnpackState((*bytes)->data());
      }
      if (t.momentum.empty()) continue;
      const std::string name = MomentumSection(t.name);
      auto bytes = FindSection(sections, name, t.momentum.size() * sizeof(float));
      if (!bytes.ok()) return bytes.status();
      if (pass == 0)
        PSTRAIN_RETURN_IF_ERROR(CheckFiniteFloats((*bytes)->data(), t.elements).WithContext(name));
      else
        std::memcpy(t.momentum.data(), (*bytes)->data(), (*bytes)->size());
    }
  }
  return Status::OK();
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
