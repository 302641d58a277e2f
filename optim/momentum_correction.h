// Momentum correction for threshold-compressed tensors (Lin et al. 2018,
// "Deep Gradient Compression", 3.1 and 3.2), shared by both compressed
// paths: pushes to the servers (roles/worker/ps_compression.h) and the
// all-gather of all-reduced weights (roles/worker/compressed_allreduce.h).
//
// Sending +-tau of the raw gradient to an optimizer that runs momentum
// delays each element's gradient by the many steps its residual waits, and
// then that momentum repeats it for another 1 / (1 - m) steps, long after
// it was current. So for a tensor that is MomentumCorrected (threshold
// compression and a momentum optimizer), the momentum moves to the worker,
// before the encoder:
//   u = m * u + g                 (per element, next to the encoder)
//   residual += u                 (nesterov: residual += g + m * u, as DGC)
//   send +-tau where |residual| >= tau, as without correction
//   u = 0 at every element sent   (momentum factor masking: what was sent
//                                  stops pushing the same direction)
//                                  in a +-tau message; a values message
//                                  (warm-up) sent the whole residual and
//                                  keeps u, so at density 1 this is
//                                  exactly momentum SGD
// and whoever applies the decoded messages runs the tensor's optimizer
// without momentum (CorrectedOptimizerFor: sgd with its lr, lr schedule
// and weight decay).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/config/config.h"

namespace pstrain {

// True when tensor `name` is momentum-corrected: its updates go out as
// threshold-encoded gradients (not mode average) and its optimizer is
// momentum. Senders and appliers decide by this one rule.
bool MomentumCorrected(const Config& config, const std::string& name);

// The optimizer that applies tensor `name`'s decoded messages: OptimizerFor,
// but sgd (same lr, schedule and weight decay) when MomentumCorrected.
OptimizerConfig CorrectedOptimizerFor(const Config& config, const std::string& name);

// u[0..n) = m * u + g; returns what the encoder takes: u, or with
// `nesterov_input` (n floats) g + m * u written there.
const float* AccumulateMomentum(float m, const float* g, int64_t n, float* u,
                                float* nesterov_input);

// Zeroes u[0..n) at every element `message` (this worker's own, for those n
// elements) sent as +-tau: decoding it gives exactly the set the receivers
// add. A values message leaves u as it is.
// `scratch` holds n zeros and is left so.
void MaskSentMomentum(const std::vector<uint8_t>& message, int64_t n, float* u, float* scratch);

}  // namespace pstrain
