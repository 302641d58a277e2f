// How one parameter's updates are compressed on their way to the servers or
// to the other workers (optim/threshold_codec.h does the work): a
// plain struct filled from YAML by config.cc, as `compression:` under
// `train:` (the default) or under a `parameters:` rule.
//
// Threshold encoding (Strom 2015, Deeplearning4j's gradient sharing): each
// worker keeps a residual per tensor; elements whose residual reaches the
// threshold tau are sent as +tau or -tau and taken off the residual, the rest
// wait for later steps, so nothing is lost, only delayed.
#pragma once

#include <cstdint>

namespace pstrain {

enum class CompressionType { kNone, kThreshold };

struct CompressionConfig {
  CompressionType type = CompressionType::kNone;
  float threshold = 1e-3f;  // tau at the start, > 0
  // Adaptive: after a message whose density (elements sent / elements) is
  // under min_density, tau shrinks by `step` (tau *= 1 - step); over
  // max_density it grows (tau *= 1 + step).
  bool adaptive = true;
  double min_density = 1e-4;  // target_density: [min, max], 0 < min <= max <= 1
  double max_density = 1e-2;
  float step = 0.1f;  // 0 < step < 1
  // Every this many messages (0: never), one is encoded with tau times
  // kShakeUpScale, to share the residual that sits just under tau.
  int64_t shake_up_every = 0;
  static constexpr float kShakeUpScale = 0.5f;
  // Warm-up (Lin et al. 2018, "Deep Gradient Compression", 3.4): for the
  // first `warmup_epochs` epochs (0: none) every message sends a set share
  // of the elements, moving exponentially per epoch from warmup_density to
  // max_density, tau picked from the message's own values to give it
  // (WarmupDensity in optim/threshold_codec.h), sending exact values. Why
  // 75%: docs/compression.md, "Warm-up".
  int64_t warmup_epochs = 4;
  double warmup_density = 0.75;  // in (0, 1]
  // PS tensors: when > 0, the servers answer a pull with the change since
  // that worker's last pull, the largest `pull_density` share of its
  // elements with their exact values (roles/server/pull_deltas.h), instead
  // of every value; 0: pulls stay dense.
  double pull_density = 0;
  bool enabled() const { return type != CompressionType::kNone; }
};

}  // namespace pstrain
