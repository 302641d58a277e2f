// OptimizerKernel: each optimizer's update rule, written once, as
// element-wise math over a span of weights, their state and their gradient.
// Its two callers differ only in where the span lies: a dense partition is
// one span (optim/dense_optimizer.h), an embedding table runs it row by row
// (embedding/sparse_optimizer.h, with Adam's step count kept per row).
//
// Per element, with g = grad + weight_decay * w (L2 decay, as PyTorch; adamw
// excepted) and t the update's 1-based number:
//   sgd:      w -= lr * g
//   momentum: v = momentum * v + g                       (PyTorch, no dampening)
//             w -= lr * v,  or with nesterov: w -= lr * (g + momentum * v)
//   adam:     m = beta1 * m + (1 - beta1) * g
//             v = beta2 * v + (1 - beta2) * g * g
//             w -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + epsilon)
//   adamw:    (PyTorch's AdamW: decay apart from the gradient, g = grad)
//             m, v as adam
//             w = w * (1 - lr * weight_decay)
//                 - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + epsilon)
//   rmsprop:  (PyTorch's, without momentum or centering)
//             sq = alpha * sq + (1 - alpha) * g * g
//             w -= lr * g / (sqrt(sq) + epsilon)
//   adagrad:  acc += g * g
//             w -= lr * g / (sqrt(acc) + epsilon)
//   ftrl:     (TensorFlow's FTRL-Proximal with beta = 0; p = -lr_power)
//             n' = n + g * g
//             z += g - (n'^p - n^p) / lr * w
//             n = n'
//             w = |z| <= l1 ? 0 : -(z - sign(z) * l1) / (n^p / lr + 2 * l2)
// Initial state: v, m, sq = 0; acc, n = initial_accumulator; z = 0.
// lr follows the schedule of ScheduledLr.
//
// Rounding: the build forbids FMA contraction and Eigen's approximate sqrt
// (top-level CMakeLists.txt), so a span gives the same floats whatever its
// length and alignment: a table row pushed every step ends exactly where a
// dense tensor would.
//
// Thread-safety: immutable after construction; Apply may run on several
// threads at once for different spans.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/common/config/optimizer_config.h"

namespace pstrain {

class OptimizerKernel {
 public:
  static constexpr int kMaxSlots = 2;

  // `config` must pass ValidateOptimizerConfig (optim/dense_optimizer.h).
  explicit OptimizerKernel(const OptimizerConfig& config);

  // State arrays per weight: sgd 0; momentum, adagrad, rmsprop 1; adam,
  // adamw, ftrl 2. Their names (checkpoints): "momentum"; "accumulator";
  // "square_avg"; "m", "v"; "z", "n".
  int num_slots() const { return num_slots_; }
  const char* slot_name(int k) const;
  float initial_slot_value(int k) const;

  // The lr of the update that follows `u` earlier ones, with W =
  // warmup_steps and d = u - W, the updates since the warm-up:
  //   u < W:                  lr * (u + 1) / W   (the W-th update has lr)
  //   step (lr_decay_steps):  lr * lr_decay ^ floor(d / lr_decay_steps)
  //   cosine (cosine_steps C): min_lr + (lr - min_lr) * (1 + cos(pi * d / C)) / 2
  //                           for d < C, then min_lr
  //   else:                   lr
  float ScheduledLr(uint64_t updates_before) const;

  // The constants of one update, computed once for a whole span: lr as
  // scheduled, and t, the update's 1-based number (adam's bias correction).
  struct Step {
    float lr = 0;
    float step_size = 0;             // adam, adamw: lr / (1 - beta1^t)
    float inv_sqrt_correction2 = 0;  // adam, adamw: 1 / sqrt(1 - beta2^t)
    float keep = 1;                  // adamw: 1 - lr * weight_decay
  };
  Step Prepare(float lr, uint64_t t) const {
    Step step;
    step.lr = lr;
    if (config_.type == OptimizerType::kAdam || config_.type == OptimizerType::kAdamW)
      AdamCorrections(t, &step);
    if (config_.type == OptimizerType::kAdamW) step.keep = 1.0f - lr * config_.weight_decay;
    return step;
  }

  // One update of n elements in place: weights[i] and slots[k][i] (k <
  // num_slots()) from grad[i]. grad is not modified and overlaps nothing.
  void Apply(const Step& step, float* weights, float* const* slots, const float* grad,
             size_t n) const;

 private:
  void AdamCorrections(uint64_t t, Step* step) const;
  const OptimizerConfig config_;
  const int num_slots_;
};

}  // namespace pstrain
