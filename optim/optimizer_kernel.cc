#include "optim/optimizer_kernel.h"

#include <Eigen/Core>
#include <algorithm>
#include <cassert>
#include <cmath>

namespace pstrain {
namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

// Each rule below is written once, as a generic lambda over (w, g, s0, s1):
// element-wise arithmetic that reads the same for one float and for an Eigen
// array, with these for the rest.
inline float Square(float x) { return x * x; }
template <typename E>
auto Square(const Eigen::ArrayBase<E>& x) {
  return x.square();
}
inline float Sqrt(float x) { return std::sqrt(x); }
template <typename E>
auto Sqrt(const Eigen::ArrayBase<E>& x) {
  return x.sqrt();
}
inline float Clamp(float x, float lo, float hi) { return std::min(std::max(x, lo), hi); }
template <typename E>
auto Clamp(const Eigen::ArrayBase<E>& x, float lo, float hi) {
  return x.max(lo).min(hi);
}
// Scalar std::pow for every element: Eigen's vector pow rounds otherwise than
// its scalar one, so results would depend on alignment.
inline float Pow(float x, float p) { return std::pow(x, p); }
template <typename E>
auto Pow(const Eigen::ArrayBase<E>& x, float p) {
  return x.unaryExpr([p](float v) { return std::pow(v, p); });
}

// An update is several statements, each a pass over its arrays. Running
// them block by block keeps the arrays one block touches (four for adam:
// 16 KiB) in L1 cache, so that each array is read from memory once per update,
// not once per statement that uses it. On a 16 MiB partition (best of 120
// updates, on a busy machine, so rough) adam, adagrad and ftrl ran 13-25%
// faster than with whole-array statements; 4096 was no better than 1024.
constexpr size_t kBlockElements = 1024;
// Spans shorter than this (embedding rows) go element by element: Eigen's
// per-statement set-up costs more than its vectors save on a short row. An
// adagrad row of dim 16, 16K random rows of 1M, in cache: 40 ns a row as Eigen
// arrays, 37 ns element by element, 34 ns for the hand-written scalar loop
// this kernel replaced.
constexpr size_t kMinVectorSpan = 64;

// Calls rule(w, g, s0, s1) over the span: w the weights, s0 and s1 slots 0 and
// 1 (unused where the optimizer has fewer), g the gradient with weight decay
// added. Short spans go one element at a time (float&, float); longer ones in
// blocks of at most kBlockElements as Eigen maps, g then an expression
// evaluated per element, so nothing is allocated. g reads w: every rule writes
// w only in its last statement, and Eigen's coefficient-wise assignment reads
// g(i) before writing w(i), so g sees the weights from before the update.
template <typename Rule>
void ForEachSpan(float* weights, float* const* slots, int num_slots, const float* grad, size_t size,
                 float weight_decay, const Rule& rule) {
  if (size < kMinVectorSpan) {
    // Slots the optimizer lacks point at scratch: a rule never touches them.
    float scratch[kMinVectorSpan];
    float* s0 = num_slots > 0 ? slots[0] : scratch;
    float* s1 = num_slots > 1 ? slots[1] : scratch;
    if (weight_decay == 0.0f) {  // the common case skips a multiply-add per element
      for (size_t i = 0; i < size; ++i) rule(weights[i], grad[i], s0[i], s1[i]);
    } else {
      for (size_t i = 0; i < size; ++i)
        rule(weights[i], grad[i] + weight_decay * weights[i], s0[i], s1[i]);
    }
    return;
  }
  for (size_t begin = 0; begin < size; begin += kBlockElements) {
    const auto n = static_cast<Eigen::Index>(std::min(kBlockElements, size - begin));
    ArrayMap w(weights + begin, n);
    ArrayMap s0(num_slots > 0 ? slots[0] + begin : nullptr, num_slots > 0 ? n : 0);
    ArrayMap s1(num_slots > 1 ? slots[1] + begin : nullptr, num_slots > 1 ? n : 0);
    ConstArrayMap grad_block(grad + begin, n);
    if (weight_decay == 0.0f) {
      rule(w, grad_block, s0, s1);
    } else {
      rule(w, grad_block + weight_decay * w, s0, s1);
    }
  }
}

int NumSlots(OptimizerType type) {
  switch (type) {
    case OptimizerType::kSgd:
      return 0;
    case OptimizerType::kMomentum:
    case OptimizerType::kAdagrad:
    case OptimizerType::kRmsprop:
      return 1;
    case OptimizerType::kAdam:
    case OptimizerType::kAdamW:
    case OptimizerType::kFtrl:
      return 2;
  }
  return 0;
}

}  // namespace

OptimizerKernel::OptimizerKernel(const OptimizerConfig& config)
    : config_(config), num_slots_(NumSlots(config.type)) {}

const char* OptimizerKernel::slot_name(int k) const {
  assert(k >= 0 && k < num_slots_);
  if (k < 0 || k >= num_slots_) return "";
  switch (config_.type) {
    case OptimizerType::kSgd:
      return "";
    case OptimizerType::kMomentum:
      return "momentum";
    case OptimizerType::kAdam:
    case OptimizerType::kAdamW:
      return k == 0 ? "m" : "v";
    case OptimizerType::kAdagrad:
      return "accumulator";
    case OptimizerType::kRmsprop:
      return "square_avg";
    case OptimizerType::kFtrl:
      return k == 0 ? "z" : "n";
  }
  return "";
}

float OptimizerKernel::initial_slot_value(int k) const {
  const bool accumulator = (config_.type == OptimizerType::kAdagrad && k == 0) ||
                           (config_.type == OptimizerType::kFtrl && k == 1);
  return accumulator ? config_.initial_accumulator : 0.0f;
}

float OptimizerKernel::ScheduledLr(uint64_t updates_before) const {
  const OptimizerConfig& c = config_;
  const auto warmup = static_cast<uint64_t>(std::max<int64_t>(c.warmup_steps, 0));
  if (updates_before < warmup)
    return static_cast<float>(static_cast<double>(c.lr) * static_cast<double>(updates_before + 1) /
                              static_cast<double>(warmup));
  const uint64_t since = updates_before - warmup;
  if (c.lr_decay_steps > 0)
    return c.lr * static_cast<float>(std::pow(
                      static_cast<double>(c.lr_decay),
                      static_cast<double>(since / static_cast<uint64_t>(c.lr_decay_steps))));
  if (c.cosine_steps > 0) {
    const auto span = static_cast<uint64_t>(c.cosine_steps);
    if (since >= span) return c.min_lr;
    constexpr double kPi = 3.14159265358979323846;
    const double cosine = std::cos(kPi * static_cast<double>(since) / static_cast<double>(span));
    return static_cast<float>(c.min_lr + (static_cast<double>(c.lr) - c.min_lr) * (1 + cosine) / 2);
  }
  return c.lr;
}

void OptimizerKernel::AdamCorrections(uint64_t t, Step* step) const {
  const auto td = static_cast<double>(t);
  const double correction1 = 1.0 - std::pow(static_cast<double>(config_.beta1), td);
  const double correction2 = 1.0 - std::pow(static_cast<double>(config_.beta2), td);
  step->step_size = static_cast<float>(step->lr / correction1);
  step->inv_sqrt_correction2 = static_cast<float>(1.0 / std::sqrt(correction2));
}

void OptimizerKernel::Apply(const Step& step, float* weights, float* const* slots,
                            const float* grad, size_t n) const {
  const OptimizerConfig& c = config_;
  const float lr = step.lr;
  // adamw's decay is its own, not the gradient's.
  const float l2 = c.type == OptimizerType::kAdamW ? 0.0f : c.weight_decay;
  auto run = [&](const auto& rule) { ForEachSpan(weights, slots, num_slots_, grad, n, l2, rule); };
  switch (c.type) {
    case OptimizerType::kSgd:
      return run([&](auto& w, const auto& g, auto&, auto&) { w -= lr * g; });
    case OptimizerType::kMomentum:
      return run([&](auto& w, const auto& g, auto& v, auto&) {
        v = c.momentum * v + g;
        if (c.nesterov) {
          w -= lr * (g + c.momentum * v);
        } else {
          w -= lr * v;
        }
      });
    case OptimizerType::kAdam:
      return run([&](auto& w, const auto& g, auto& m, auto& v) {
        m = c.beta1 * m + (1.0f - c.beta1) * g;
        v = c.beta2 * v + (1.0f - c.beta2) * Square(g);
        w -= step.step_size * m / (Sqrt(v) * step.inv_sqrt_correction2 + c.epsilon);
      });
    case OptimizerType::kAdamW:
      return run([&](auto& w, const auto& g, auto& m, auto& v) {
        m = c.beta1 * m + (1.0f - c.beta1) * g;
        v = c.beta2 * v + (1.0f - c.beta2) * Square(g);
        w = w * step.keep - step.step_size * m / (Sqrt(v) * step.inv_sqrt_correction2 + c.epsilon);
      });
    case OptimizerType::kRmsprop:
      return run([&](auto& w, const auto& g, auto& square_avg, auto&) {
        square_avg = c.alpha * square_avg + (1.0f - c.alpha) * Square(g);
        w -= lr * g / (Sqrt(square_avg) + c.epsilon);
      });
    case OptimizerType::kAdagrad:
      return run([&](auto& w, const auto& g, auto& accumulator, auto&) {
        accumulator += Square(g);
        w -= lr * g / (Sqrt(accumulator) + c.epsilon);
      });
    case OptimizerType::kFtrl: {
      const float inv_lr = 1.0f / c.lr;  // fixed: ftrl has no lr schedule
      const float two_l2 = 2.0f * c.l2;
      const float p = -c.lr_power;
      auto ftrl = [&](const auto& power) {
        run([&](auto& w, const auto& g, auto& z, auto& nn) {
          z += g - (power(nn + Square(g)) - power(nn)) * inv_lr * w;
          nn += Square(g);
          // z - clamp(z, -l1, l1) is z - sign(z) * l1 outside [-l1, l1] and
          // exactly 0 inside, without a branch.
          w = (Clamp(z, -c.l1, c.l1) - z) / (power(nn) * inv_lr + two_l2);
        });
      };
      // lr_power = -0.5 is the usual setting; sqrt is several times cheaper
      // than pow.
      if (p == 0.5f) return ftrl([](const auto& x) { return Sqrt(x); });
      return ftrl([p](const auto& x) { return Pow(x, p); });
    }
  }
}

}  // namespace pstrain
