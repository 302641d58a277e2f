// Dense optimizers: update one contiguous block of float32 weights (a
// partition of a tensor, as a server holds it) in place from a gradient of the
// same size. Servers apply one on every push, so updates are vectorized and
// allocate nothing; all state is allocated once, at construction.
//
// Per element, with g = grad + weight_decay * w (L2 decay, as PyTorch) and
// t = steps() after this update's increment:
//   sgd:      w -= lr * g
//   momentum: v = momentum * v + g                       (PyTorch, no dampening)
//             w -= lr * v,  or with nesterov: w -= lr * (g + momentum * v)
//   adam:     m = beta1 * m + (1 - beta1) * g
//             v = beta2 * v + (1 - beta2) * g * g
//             w -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + epsilon)
//   adagrad:  acc += g * g
//             w -= lr * g / (sqrt(acc) + epsilon)
//   ftrl:     (TensorFlow's FTRL-Proximal with beta = 0; p = -lr_power)
//             n' = n + g * g
//             z += g - (n'^p - n^p) / lr * w
//             n = n'
//             w = |z| <= l1 ? 0 : -(z - sign(z) * l1) / (n^p / lr + 2 * l2)
// Initial state: v, m = 0; acc, n = initial_accumulator; z = 0.
//
// Ownership: an optimizer owns its state slots; Update() borrows the weights
// and gradient for the duration of the call only.
// Thread-safety: none inside; one instance is used by one thread at a time.
// Distinct instances share nothing and may run on different threads.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "src/common/optimizer_config.h"
#include "src/common/status.h"

namespace pstrain {

class DenseOptimizer {
 public:
  virtual ~DenseOptimizer() = default;
  DenseOptimizer(const DenseOptimizer&) = delete;
  DenseOptimizer& operator=(const DenseOptimizer&) = delete;

  // One step: weights[i] is updated with grad[i] for i < size(). Both point
  // to size() floats (any alignment); grad is not modified and must not
  // overlap weights.
  virtual void Update(float* weights, const float* grad) = 0;

  // Elements handled, fixed at construction.
  size_t size() const { return size_; }
  // Updates applied so far (adam's bias correction depends on it).
  uint64_t steps() const { return steps_; }

  // Optimizer state, for checkpoints: slot k (0 <= k < num_slots()) is size()
  // floats owned by this optimizer, valid for its lifetime. Restoring means
  // writing every slot and calling set_steps().
  //   sgd: none; momentum: "momentum"; adam: "m", "v";
  //   adagrad: "accumulator"; ftrl: "z", "n".
  virtual int num_slots() const = 0;
  virtual float* slot(int k) = 0;
  virtual const char* slot_name(int k) const = 0;
  void set_steps(uint64_t steps) { steps_ = steps; }
  // The step decay of config.lr_decay_steps / lr_decay (MakeDenseOptimizer
  // sets it).
  void set_lr_decay(int64_t every_steps, float factor) {
    decay_steps_ = every_steps;
    decay_ = factor;
  }

 protected:
  // `lr` as scheduled for the update about to be applied (call before
  // BeginStep).
  float ScheduledLr(float lr) const {
    if (decay_steps_ <= 0) return lr;
    return lr * static_cast<float>(
                    std::pow(static_cast<double>(decay_),
                             static_cast<double>(steps_ / static_cast<uint64_t>(decay_steps_))));
  }
  explicit DenseOptimizer(size_t size) : size_(size) {}
  // Counts the update about to be applied; returns t, its 1-based number.
  uint64_t BeginStep() { return ++steps_; }

 private:
  const size_t size_;
  uint64_t steps_ = 0;
  int64_t decay_steps_ = 0;
  float decay_ = 1.0f;
};

// Checks the fields that config.type uses (a field another type uses is
// ignored): lr > 0 and weight_decay >= 0 always; momentum in [0, 1);
// beta1, beta2 in [0, 1) and epsilon > 0 for adam; epsilon > 0 and
// initial_accumulator >= 0 for adagrad; initial_accumulator > 0,
// lr_power <= 0, l1 >= 0, l2 >= 0 for ftrl. Every checked value must be
// finite. The error names the optimizer, the field and its value.
Status ValidateOptimizerConfig(const OptimizerConfig& config);

// A validated optimizer for `size` elements, its state initialized as above.
StatusOr<std::unique_ptr<DenseOptimizer>> MakeDenseOptimizer(const OptimizerConfig& config,
                                                             size_t size);

// "sgd", "momentum", "adam", "adagrad", "ftrl"; "unknown" for a value outside
// the enum.
const char* OptimizerTypeName(OptimizerType type);

}  // namespace pstrain
