#include "optim/dense_optimizer.h"

#include <fmt/format.h>

#include <cassert>
#include <cmath>

namespace pstrain {
DenseOptimizer::DenseOptimizer(const OptimizerConfig& config, size_t size)
    : kernel_(config), size_(size) {
  for (int k = 0; k < kernel_.num_slots(); ++k)
    slots_[k].assign(size, kernel_.initial_slot_value(k));
}

float* DenseOptimizer::slot(int k) {
  assert(k >= 0 && k < num_slots());
  return k >= 0 && k < num_slots() ? slots_[k].data() : nullptr;
}

void DenseOptimizer::Update(float* weights, const float* grad) {
  const float lr = kernel_.ScheduledLr(steps_);
  const OptimizerKernel::Step step = kernel_.Prepare(lr, ++steps_);
  float* const slots[OptimizerKernel::kMaxSlots] = {slots_[0].data(), slots_[1].data()};
  kernel_.Apply(step, weights, slots, grad, size_);
}

namespace {

// OK when `value` is finite and `in_range`; else "optimizer adam: beta2 must
// be in [0, 1), got 1".
Status CheckField(const OptimizerConfig& config, const char* field, float value, bool in_range,
                  const char* expected) {
  if (std::isfinite(value) && in_range) return Status::OK();
  return InvalidArgument(fmt::format("optimizer {}: {} must be {}, got {}",
                                     OptimizerTypeName(config.type), field, expected, value));
}

Status CheckUnitInterval(const OptimizerConfig& config, const char* field, float value) {
  return CheckField(config, field, value, value >= 0.0f && value < 1.0f, "in [0, 1)");
}

// The schedule's keys: one decay at most, after an optional warm-up.
Status ValidateSchedule(const OptimizerConfig& c) {
  const char* name = OptimizerTypeName(c.type);
  if (c.warmup_steps < 0 || c.lr_decay_steps < 0 || c.cosine_steps < 0)
    return InvalidArgument(fmt::format(
        "optimizer {}: warmup_steps, lr_decay_steps and cosine_steps must be >= 0, got {}, {}, {}",
        name, c.warmup_steps, c.lr_decay_steps, c.cosine_steps));
  const bool scheduled = c.warmup_steps > 0 || c.lr_decay_steps > 0 || c.cosine_steps > 0;
  if (scheduled && c.type == OptimizerType::kFtrl)
    return InvalidArgument(
        "optimizer ftrl: warmup_steps, lr_decay_steps and cosine_steps are not supported (ftrl's "
        "state assumes a fixed lr)");
  if (c.lr_decay_steps > 0 && c.cosine_steps > 0)
    return InvalidArgument(fmt::format(
        "optimizer {}: lr_decay_steps ({}) and cosine_steps ({}) are two decays: give one", name,
        c.lr_decay_steps, c.cosine_steps));
  if (c.lr_decay_steps > 0)
    PSTRAIN_RETURN_IF_ERROR(CheckField(c, "lr_decay", c.lr_decay,
                                       c.lr_decay > 0.0f && c.lr_decay <= 1.0f, "in (0, 1]"));
  if (c.cosine_steps > 0)
    PSTRAIN_RETURN_IF_ERROR(CheckField(c, "min_lr", c.min_lr, c.min_lr >= 0.0f && c.min_lr < c.lr,
                                       ">= 0 and below lr"));
  return Status::OK();
}

}  // namespace

Status ValidateOptimizerConfig(const OptimizerConfig& config) {
  const OptimizerConfig& c = config;
  PSTRAIN_RETURN_IF_ERROR(CheckField(c, "lr", c.lr, c.lr > 0.0f, "> 0"));
  PSTRAIN_RETURN_IF_ERROR(
      CheckField(c, "weight_decay", c.weight_decay, c.weight_decay >= 0.0f, ">= 0"));
  PSTRAIN_RETURN_IF_ERROR(ValidateSchedule(c));
  switch (c.type) {
    case OptimizerType::kSgd:
      return Status::OK();
    case OptimizerType::kMomentum:
      return CheckUnitInterval(c, "momentum", c.momentum);
    case OptimizerType::kAdam:
    case OptimizerType::kAdamW:
      PSTRAIN_RETURN_IF_ERROR(CheckUnitInterval(c, "beta1", c.beta1));
      PSTRAIN_RETURN_IF_ERROR(CheckUnitInterval(c, "beta2", c.beta2));
      return CheckField(c, "epsilon", c.epsilon, c.epsilon > 0.0f, "> 0");
    case OptimizerType::kRmsprop:
      PSTRAIN_RETURN_IF_ERROR(CheckUnitInterval(c, "alpha", c.alpha));
      return CheckField(c, "epsilon", c.epsilon, c.epsilon > 0.0f, "> 0");
    case OptimizerType::kAdagrad:
      PSTRAIN_RETURN_IF_ERROR(CheckField(c, "epsilon", c.epsilon, c.epsilon > 0.0f, "> 0"));
      return CheckField(c, "initial_accumulator", c.initial_accumulator,
                        c.initial_accumulator >= 0.0f, ">= 0");
    case OptimizerType::kFtrl:
      // n^p / lr + 2 * l2 divides the new weight: n = 0 with l2 = 0 would
      // divide by zero.
      PSTRAIN_RETURN_IF_ERROR(CheckField(c, "initial_accumulator", c.initial_accumulator,
                                         c.initial_accumulator > 0.0f, "> 0"));
      PSTRAIN_RETURN_IF_ERROR(CheckField(c, "lr_power", c.lr_power, c.lr_power <= 0.0f, "<= 0"));
      PSTRAIN_RETURN_IF_ERROR(CheckField(c, "l1", c.l1, c.l1 >= 0.0f, ">= 0"));
      return CheckField(c, "l2", c.l2, c.l2 >= 0.0f, ">= 0");
  }
  return InvalidArgument(fmt::format("unknown optimizer type {}", static_cast<int>(c.type)));
}

StatusOr<std::unique_ptr<DenseOptimizer>> MakeDenseOptimizer(const OptimizerConfig& config,
                                                             size_t size) {
  PSTRAIN_RETURN_IF_ERROR(ValidateOptimizerConfig(config));
  return std::make_unique<DenseOptimizer>(config, size);
}

const char* OptimizerTypeName(OptimizerType type) {
  switch (type) {
    case OptimizerType::kSgd:
      return "sgd";
    case OptimizerType::kMomentum:
      return "momentum";
    case OptimizerType::kAdam:
      return "adam";
    case OptimizerType::kAdagrad:
      return "adagrad";
    case OptimizerType::kFtrl:
      return "ftrl";
    case OptimizerType::kAdamW:
      return "adamw";
    case OptimizerType::kRmsprop:
      return "rmsprop";
  }
  return "unknown";
}

}  // namespace pstrain
