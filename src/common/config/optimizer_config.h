// How one parameter (or the default for all) is optimized: a plain struct,
// filled from YAML by config.cc and used by optim/. Field meanings follow
// PyTorch's and TensorFlow's optimizers; optim/dense_optimizer.h gives each
// update formula.
#pragma once

#include <cstdint>

namespace pstrain {

enum class OptimizerType { kSgd, kMomentum, kAdam, kAdagrad, kFtrl };

struct OptimizerConfig {
  OptimizerType type = OptimizerType::kSgd;
  float lr = 0.01f;
  float weight_decay = 0.0f;  // L2: weight_decay * w is added to the gradient
  // Step decay: lr is multiplied by lr_decay every lr_decay_steps updates
  // (0: never). Not for ftrl, whose state assumes a fixed lr.
  int64_t lr_decay_steps = 0;
  float lr_decay = 0.1f;
  // momentum
  float momentum = 0.9f;
  bool nesterov = false;
  // adam
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;  // adam; adagrad uses it too
  // adagrad and ftrl
  float initial_accumulator = 0.1f;
  // ftrl
  float lr_power = -0.5f;
  float l1 = 0.0f;
  float l2 = 0.0f;
};

}  // namespace pstrain
