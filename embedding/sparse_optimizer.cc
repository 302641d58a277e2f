#include "embedding/sparse_optimizer.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace pstrain {
namespace {

int NumSlots(OptimizerType type) {
  switch (type) {
    case OptimizerType::kSgd:
      return 0;
    case OptimizerType::kMomentum:
    case OptimizerType::kAdagrad:
      return 1;
    case OptimizerType::kAdam:
    case OptimizerType::kFtrl:
      return 2;
  }
  return 0;
}

// Calls step(i, g) for each element, g the gradient with weight decay added
// (skipped when 0, as the dense optimizer does, so the floats match).
template <typename Step>
void ForEachElement(const float* weights, const float* grad, int dim, float weight_decay,
                    const Step& step) {
  if (weight_decay == 0.0f) {
    for (int i = 0; i < dim; ++i) step(i, grad[i]);
  } else {
    for (int i = 0; i < dim; ++i) step(i, grad[i] + weight_decay * weights[i]);
  }
}

}  // namespace

SparseOptimizer::SparseOptimizer(const OptimizerConfig& config, int dim)
    : config_(config), dim_(dim), num_slots_(NumSlots(config.type)) {
  assert(dim > 0);
}

const char* SparseOptimizer::slot_name(int k) const {
  static const char* const kNames[][2] = {
      {"", ""}, {"momentum", ""}, {"m", "v"}, {"accumulator", ""}, {"z", "n"}};
  assert(k >= 0 && k < num_slots_);
  return k >= 0 && k < num_slots_ ? kNames[static_cast<int>(config_.type)][k] : "";
}

void SparseOptimizer::InitSlots(float* slots) const {
  std::fill(slots, slots + num_slots_ * dim_, 0.0f);
  if (config_.type == OptimizerType::kAdagrad) {
    std::fill(slots, slots + dim_, config_.initial_accumulator);
  } else if (config_.type == OptimizerType::kFtrl) {
    std::fill(slots + dim_, slots + 2 * dim_, config_.initial_accumulator);  // n; z stays 0
  }
}

float SparseOptimizer::ScheduledLr(int64_t table_updates) const {
  if (config_.lr_decay_steps <= 0) return config_.lr;
  // As DenseOptimizer::ScheduledLr, term for term.
  return config_.lr * static_cast<float>(std::pow(
                          static_cast<double>(config_.lr_decay),
                          static_cast<double>(static_cast<uint64_t>(table_updates) /
                                              static_cast<uint64_t>(config_.lr_decay_steps))));
}

void SparseOptimizer::Update(float* w, float* slots, const float* grad, int64_t row_step,
                             float lr) const {
  const OptimizerConfig& c = config_;
  const float wd = c.weight_decay;
  switch (c.type) {
    case OptimizerType::kSgd:
      ForEachElement(w, grad, dim_, wd, [&](int i, float g) { w[i] -= lr * g; });
      return;
    case OptimizerType::kMomentum: {
      float* v = slots;
      ForEachElement(w, grad, dim_, wd, [&](int i, float g) {
        v[i] = c.momentum * v[i] + g;
        w[i] -= c.nesterov ? lr * (g + c.momentum * v[i]) : lr * v[i];
      });
      return;
    }
    case OptimizerType::kAdam: {
      float* m = slots;
      float* v = slots + dim_;
      const auto t = static_cast<double>(row_step);
      const double correction1 = 1.0 - std::pow(static_cast<double>(c.beta1), t);
      const double correction2 = 1.0 - std::pow(static_cast<double>(c.beta2), t);
      const auto step_size = static_cast<float>(lr / correction1);
      const auto inv_sqrt_correction2 = static_cast<float>(1.0 / std::sqrt(correction2));
      ForEachElement(w, grad, dim_, wd, [&](int i, float g) {
        m[i] = c.beta1 * m[i] + (1.0f - c.beta1) * g;
        v[i] = c.beta2 * v[i] + (1.0f - c.beta2) * (g * g);
        w[i] -= step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_correction2 + c.epsilon);
      });
      return;
    }
    case OptimizerType::kAdagrad: {
      float* accumulator = slots;
      ForEachElement(w, grad, dim_, wd, [&](int i, float g) {
        accumulator[i] += g * g;
        w[i] -= lr * g / (std::sqrt(accumulator[i]) + c.epsilon);
      });
      return;
    }
    case OptimizerType::kFtrl: {
      float* z = slots;
      float* n = slots + dim_;
      const float inv_lr = 1.0f / c.lr;  // fixed: ftrl has no lr schedule
      const float p = -c.lr_power;
      const float two_l2 = 2.0f * c.l2;
      // sqrt for the usual lr_power -0.5, as the dense optimizer does.
      auto power = [p](float x) { return p == 0.5f ? std::sqrt(x) : std::pow(x, p); };
      ForEachElement(w, grad, dim_, wd, [&](int i, float g) {
        z[i] += g - (power(n[i] + g * g) - power(n[i])) * inv_lr * w[i];
        n[i] += g * g;
        w[i] = (std::min(std::max(z[i], -c.l1), c.l1) - z[i]) / (power(n[i]) * inv_lr + two_l2);
      });
      return;
    }
  }
}

}  // namespace pstrain
