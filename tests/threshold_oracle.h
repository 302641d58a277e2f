// Threshold-compressed training written out apart from the code under test,
// for the two paths that must both follow it: pushes to the servers
// (ps_compression_test) and the all-gather of all-reduced weights
// (allreduce_compression_test). The rule is the one optim/threshold_codec.h
// and optim/momentum_correction.h state, one element at a time:
//   u = m * u + g                  (m = 0 without momentum: u = g)
//   residual += u                  (nesterov: residual += g + m * u)
//   where |residual| >= tau: send +-tau, take it off, and zero u (masking)
//   w -= lr * (mean of what the workers sent + weight_decay * w)
// with lr multiplied by lr_decay every lr_decay_steps steps.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "src/common/config/optimizer_config.h"

namespace pstrain {
namespace testing {

struct ThresholdRun {
  int workers = 2;
  int64_t steps = 1;
  int64_t elements = 1;
  float tau = 0.0f;
  float initial = 1.0f;  // every weight at the start
  // sgd or momentum (momentum, nesterov); lr, its schedule and weight decay
  // for both.
  OptimizerConfig optimizer;
  // false: momentum is not zeroed where a message sent, to show a stream on
  // which masking makes a difference.
  bool mask = true;
  std::function<float(int rank, int64_t step, int64_t i)> gradient;
};

// A run of `workers` x `steps` over `elements` weights, masking on.
inline ThresholdRun MakeThresholdRun(int workers, int64_t steps, int64_t elements, float tau,
                                     const OptimizerConfig& optimizer,
                                     std::function<float(int, int64_t, int64_t)> gradient) {
  ThresholdRun run;
  run.workers = workers;
  run.steps = steps;
  run.elements = elements;
  run.tau = tau;
  run.optimizer = optimizer;
  run.gradient = std::move(gradient);
  return run;
}

struct ThresholdOutcome {
  std::vector<float> weights;         // after the last step
  std::vector<std::vector<float>> u;  // each worker's momentum after it
  int64_t masked = 0;                 // momenta that masking zeroed (nonzero ones)
};

inline ThresholdOutcome ThresholdOracle(const ThresholdRun& run) {
  const OptimizerConfig& o = run.optimizer;
  const float m = o.type == OptimizerType::kMomentum ? o.momentum : 0.0f;
  const bool nesterov = o.type == OptimizerType::kMomentum && o.nesterov;
  ThresholdOutcome out;
  out.weights.assign(run.elements, run.initial);
  out.u.assign(run.workers, std::vector<float>(run.elements, 0.0f));
  std::vector<std::vector<float>> residual = out.u;
  for (int64_t step = 0; step < run.steps; ++step) {
    float lr = o.lr;
    for (int64_t k = 0; o.lr_decay_steps > 0 && k < step / o.lr_decay_steps; ++k) lr *= o.lr_decay;
    for (int64_t i = 0; i < run.elements; ++i) {
      float sum = 0;
      for (int r = 0; r < run.workers; ++r) {
        const float g = run.gradient(r, step, i);
        float& u = out.u[r][i];
        u = m * u + g;
        residual[r][i] += nesterov ? g + m * u : u;
        if (std::fabs(residual[r][i]) >= run.tau) {
          const float sent = residual[r][i] > 0 ? run.tau : -run.tau;
          residual[r][i] -= sent;
          sum += sent;
          if (!run.mask) continue;
          if (u != 0.0f) ++out.masked;
          u = 0.0f;
        }
      }
      float& w = out.weights[i];
      w -= lr * (sum / run.workers + o.weight_decay * w);
    }
  }
  return out;
}

}  // namespace testing
}  // namespace pstrain
