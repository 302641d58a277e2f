#include "optim/momentum_correction.h"

#include <cassert>

#include "optim/threshold_codec.h"

namespace pstrain {

bool MomentumCorrected(const Config& config, const std::string& name) {
  return config.train.mode != UpdateMode::kAverage &&
         CompressionFor(config, name).type == CompressionType::kThreshold &&
         OptimizerFor(config, name).type == OptimizerType::kMomentum;
}

OptimizerConfig CorrectedOptimizerFor(const Config& config, const std::string& name) {
  OptimizerConfig o = OptimizerFor(config, name);
  if (MomentumCorrected(config, name)) o.type = OptimizerType::kSgd;
  return o;
}

const float* AccumulateMomentum(float m, const float* g, int64_t n, float* u,
                                float* nesterov_input) {
  for (int64_t i = 0; i < n; ++i) u[i] = m * u[i] + g[i];
  if (nesterov_input == nullptr) return u;
  // As PyTorch's nesterov (optim/optimizer_kernel.h) and DGC's: g + m * u.
  for (int64_t i = 0; i < n; ++i) nesterov_input[i] = g[i] + m * u[i];
  return nesterov_input;
}

void MaskSentMomentum(const std::vector<uint8_t>& message, int64_t n, float* u, float* scratch) {
  if (ThresholdMessageSendsValues(message)) return;
  Status st = DecodeThresholdAdd(message.data(), message.size(), n, 1.0f, scratch);
  assert(st.ok());  // our own encoder's message
  if (!st.ok()) return;
  // scratch[i] is +-tau (never 0) where the message sent i.
  for (int64_t i = 0; i < n; ++i) {
    u[i] = scratch[i] != 0.0f ? 0.0f : u[i];
    scratch[i] = 0.0f;
  }
}

}  // namespace pstrain
