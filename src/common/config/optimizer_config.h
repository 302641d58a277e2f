// How one parameter (or the default for all) is optimized: a plain struct,
// filled from YAML by config.cc and used by optim/. Field meanings follow
// PyTorch's and TensorFlow's optimizers; optim/dense_optimizer.h gives each
// update formula.
#pragma once

#include <cstdint>

namespace pstrain {

enum class OptimizerType { kSgd, kMomentum, kAdam, kAdagrad, kFtrl, kAdamW, kRmsprop };

struct OptimizerConfig {
  OptimizerType type = OptimizerType::kSgd;
  float lr = 0.01f;
  // L2: weight_decay * w is added to the gradient; adamw decays the
  // weights apart from it (w -= lr * weight_decay * w), 0.01 unless given.
  float weight_decay = 0.0f;
  // The lr schedule (OptimizerKernel::ScheduledLr), counted in updates: a
  // linear warm-up over warmup_steps, then either step decay (lr times
  // lr_decay every lr_decay_steps) or cosine decay to min_lr over
  // cosine_steps (0: none). None of them for ftrl, whose state assumes a
  // fixed lr.
  int64_t warmup_steps = 0;
  int64_t lr_decay_steps = 0;
  float lr_decay = 0.1f;
  int64_t cosine_steps = 0;
  float min_lr = 0.0f;
  // momentum
  float momentum = 0.9f;
  bool nesterov = false;
  // adam and adamw
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;  // adam, adamw, adagrad and rmsprop
  // rmsprop: decay of the mean square
  float alpha = 0.99f;
  // adagrad and ftrl
  float initial_accumulator = 0.1f;
  // ftrl
  float lr_power = -0.5f;
  float l1 = 0.0f;
  float l2 = 0.0f;
};

}  // namespace pstrain
