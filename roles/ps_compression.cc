#include "roles/ps_compression.h"

#include <algorithm>

namespace pstrain {

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
  }
}

const std::vector<std::vector<uint8_t>>* PsCompression::Encode(int tensor, const float* gradient) {
  Tensor& t = tensors_[tensor];
  t.last_bytes = 0;
  for (size_t i = 0; i < t.encoders.size(); ++i) {
    ThresholdEncodeStats stats = t.encoders[i]->Encode(gradient + t.offsets[i], &t.messages[i]);
    counters_.Add(stats, t.encoders[i]->size());
    t.last_bytes += static_cast<int64_t>(stats.bytes);
  }
  return &t.messages;
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
