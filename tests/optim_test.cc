// Tests for optim/dense_optimizer.h: each formula against numbers computed
// apart from this code (python3, in double, from the header's formulas), the
// vectorized blocks against a scalar loop, checkpoint slots, validation.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "optim/dense_optimizer.h"
#include "optim/optimizer_kernel.h"
#include "tests/optimizer_cases.h"

namespace pstrain {
namespace {

using testing::Config;
using testing::kGrads;
using testing::kInitialWeights;
using testing::LiteralCase;
using testing::LiteralCases;
using testing::Vec3;

std::unique_ptr<DenseOptimizer> Make(const OptimizerConfig& config, size_t size) {
  auto optimizer = MakeDenseOptimizer(config, size);
  REQUIRE_MESSAGE(optimizer.ok(), optimizer.status().ToString());
  return std::move(optimizer).value();
}

TEST_CASE("each optimizer matches its formula, step by step") {
  for (const LiteralCase& c : LiteralCases()) {
    INFO(c.name);
    auto optimizer = Make(c.config, 3);
    Vec3 w = kInitialWeights;
    for (int step = 0; step < 3; ++step) {
      INFO("step " << step + 1);
      optimizer->Update(w.data(), kGrads[step].data());
      for (int i = 0; i < 3; ++i) CHECK(w[i] == doctest::Approx(c.expected[step][i]).epsilon(1e-6));
    }
    CHECK(optimizer->steps() == 3);
  }
}

TEST_CASE("ftrl with l1 sets a weight to exactly zero") {
  OptimizerConfig c = Config(OptimizerType::kFtrl, 0.1f);
  c.l1 = 0.2f;
  auto optimizer = Make(c, 3);
  Vec3 w = kInitialWeights;
  optimizer->Update(w.data(), kGrads[0].data());
  CHECK(w[0] == 0.0f);
  CHECK_FALSE(std::signbit(w[0]));  // +0, not -0: a checkpoint diff shows no change
  CHECK(w[1] != 0.0f);
}

// The header's formulas one element at a time, apart from the Eigen code.
struct ReferenceOptimizer {
  ReferenceOptimizer(const OptimizerConfig& config, size_t size)
      : c(config),
        a(size, config.type == OptimizerType::kAdagrad ? config.initial_accumulator : 0.0f),
        b(size, config.type == OptimizerType::kFtrl ? config.initial_accumulator : 0.0f) {}

  void Update(float* weights, const float* grad) {
    ++t;
    for (size_t i = 0; i < a.size(); ++i) {
      float& w = weights[i];
      const float g = grad[i] + (c.type == OptimizerType::kAdamW ? 0.0f : c.weight_decay) * w;
      const float p = -c.lr_power;
      switch (c.type) {
        case OptimizerType::kSgd:
          w -= c.lr * g;
          break;
        case OptimizerType::kMomentum:
          a[i] = c.momentum * a[i] + g;
          w -= c.lr * (c.nesterov ? g + c.momentum * a[i] : a[i]);
          break;
        case OptimizerType::kAdam: {
          a[i] = c.beta1 * a[i] + (1 - c.beta1) * g;
          b[i] = c.beta2 * b[i] + (1 - c.beta2) * g * g;
          const auto correction1 = static_cast<float>(1 - std::pow(double{c.beta1}, t));
          const auto correction2 = static_cast<float>(1 - std::pow(double{c.beta2}, t));
          w -= c.lr * (a[i] / correction1) / (std::sqrt(b[i] / correction2) + c.epsilon);
          break;
        }
        case OptimizerType::kAdamW: {
          a[i] = c.beta1 * a[i] + (1 - c.beta1) * g;
          b[i] = c.beta2 * b[i] + (1 - c.beta2) * g * g;
          const auto correction1 = static_cast<float>(1 - std::pow(double{c.beta1}, t));
          const auto correction2 = static_cast<float>(1 - std::pow(double{c.beta2}, t));
          w = w * (1 - c.lr * c.weight_decay) -
              c.lr * (a[i] / correction1) / (std::sqrt(b[i] / correction2) + c.epsilon);
          break;
        }
        case OptimizerType::kRmsprop:
          a[i] = c.alpha * a[i] + (1 - c.alpha) * g * g;
          w -= c.lr * g / (std::sqrt(a[i]) + c.epsilon);
          break;
        case OptimizerType::kAdagrad:
          a[i] += g * g;
          w -= c.lr * g / (std::sqrt(a[i]) + c.epsilon);
          break;
        case OptimizerType::kFtrl: {  // a is z, b is n
          const float n_new = b[i] + g * g;
          const float sigma = (std::pow(n_new, p) - std::pow(b[i], p)) / c.lr;
          a[i] += g - sigma * w;
          b[i] = n_new;
          w = std::fabs(a[i]) <= c.l1
                  ? 0.0f
                  : -(a[i] - std::copysign(c.l1, a[i])) / (std::pow(b[i], p) / c.lr + 2 * c.l2);
          break;
        }
      }
    }
  }

  OptimizerConfig c;
  std::vector<float> a, b;
  uint64_t t = 0;
};

// Deterministic values in [-1, 1); <random>'s distributions differ between
// standard libraries.
struct Lcg {
  float Next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>(state >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  }
  uint64_t state = 12345;
};

std::vector<float> RandomVector(Lcg& lcg, size_t n, float scale) {
  std::vector<float> v(n);
  for (float& x : v) x = scale * lcg.Next();
  return v;
}

std::vector<OptimizerConfig> VariedConfigs() {
  std::vector<OptimizerConfig> configs = {
      Config(OptimizerType::kSgd, 0.1f, 0.01f),       Config(OptimizerType::kMomentum, 0.05f),
      Config(OptimizerType::kMomentum, 0.05f, 0.01f), Config(OptimizerType::kAdam, 0.01f, 0.01f),
      Config(OptimizerType::kAdagrad, 0.1f, 0.01f),   Config(OptimizerType::kFtrl, 0.1f),
      Config(OptimizerType::kFtrl, 0.1f, 0.01f)};
  configs[2].nesterov = true;
  configs[5].l1 = 0.05f;
  configs[5].l2 = 0.01f;
  configs[6].lr_power = -0.6f;
  configs[6].l1 = 0.01f;
  configs.push_back(Config(OptimizerType::kAdamW, 0.01f, 0.05f));
  configs.push_back(Config(OptimizerType::kRmsprop, 0.01f, 0.01f));
  return configs;
}

TEST_CASE("a long, unaligned, odd-sized partition matches a scalar loop") {
  // Odd, so the last block (optimizers work in blocks of 1024) ends in a
  // partial SIMD vector.
  constexpr size_t kSize = 10007;
  for (const OptimizerConfig& config : VariedConfigs()) {
    INFO(OptimizerTypeName(config.type) << " weight_decay " << config.weight_decay << " nesterov "
                                        << config.nesterov << " lr_power " << config.lr_power);
    Lcg lcg;
    std::vector<float> start = RandomVector(lcg, kSize + 1, 1.0f);
    std::vector<float> expected(start.begin() + 1, start.end());
    std::vector<float> actual = start;  // updated from actual.data() + 1: not 16-byte aligned
    auto optimizer = Make(config, kSize);
    ReferenceOptimizer reference(config, kSize);
    for (int step = 0; step < 5; ++step) {
      std::vector<float> grad = RandomVector(lcg, kSize, 0.5f);
      grad[step] = 0.0f;
      optimizer->Update(actual.data() + 1, grad.data());
      reference.Update(expected.data(), grad.data());
    }
    size_t mismatches = 0, first = 0;
    for (size_t i = 0; i < kSize; ++i) {
      const float x = actual[i + 1], y = expected[i];
      if (!(std::fabs(x - y) <= 1e-5f * std::max(std::fabs(x), std::fabs(y)) + 1e-6f)) {
        if (mismatches++ == 0) first = i;
      }
    }
    INFO("first mismatch at " << first << ": " << actual[first + 1] << " vs " << expected[first]);
    CHECK(mismatches == 0);
    CHECK(actual[0] == start[0]);  // the float before the partition is untouched
  }
}

TEST_CASE("the kernel gives the same floats over a long span as over rows of it") {
  // A table row pushed every step must end exactly where a dense partition
  // does: the kernel's floats may not depend on a span's length or
  // alignment. 1000 elements at once (Eigen arrays), then the same as 40
  // unaligned rows of 25 (element by element).
  constexpr size_t kSize = 1000, kRow = 25;
  for (const OptimizerConfig& config : VariedConfigs()) {
    INFO(OptimizerTypeName(config.type) << " weight_decay " << config.weight_decay << " nesterov "
                                        << config.nesterov << " lr_power " << config.lr_power);
    const OptimizerKernel kernel(config);
    Lcg lcg;
    std::vector<float> span = RandomVector(lcg, kSize + 1, 1.0f), rows = span;
    std::vector<std::vector<float>> span_slots, row_slots;
    for (int k = 0; k < kernel.num_slots(); ++k)
      span_slots.emplace_back(kSize, kernel.initial_slot_value(k));
    row_slots = span_slots;
    for (uint64_t t = 1; t <= 4; ++t) {
      const std::vector<float> grad = RandomVector(lcg, kSize, 0.5f);
      const OptimizerKernel::Step step = kernel.Prepare(kernel.ScheduledLr(t - 1), t);
      float* slots[OptimizerKernel::kMaxSlots] = {};
      for (int k = 0; k < kernel.num_slots(); ++k) slots[k] = span_slots[k].data();
      kernel.Apply(step, span.data() + 1, slots, grad.data(), kSize);
      for (size_t r = 0; r < kSize; r += kRow) {
        for (int k = 0; k < kernel.num_slots(); ++k) slots[k] = row_slots[k].data() + r;
        kernel.Apply(step, rows.data() + 1 + r, slots, grad.data() + r, kRow);
      }
    }
    CHECK(span == rows);
    CHECK(span_slots == row_slots);
  }
}

TEST_CASE("state slots have their names and survive a checkpoint restore") {
  const std::vector<std::vector<std::string>> kNames = {
      {}, {"momentum"}, {"m", "v"}, {"accumulator"}, {"z", "n"}, {"m", "v"}, {"square_avg"}};
  constexpr size_t kSize = 37;
  for (const OptimizerConfig& config : VariedConfigs()) {
    INFO(std::string(OptimizerTypeName(config.type)) << " lr_power " << config.lr_power);
    const auto& names = kNames[static_cast<int>(config.type)];
    auto original = Make(config, kSize);
    REQUIRE(original->num_slots() == static_cast<int>(names.size()));
    for (int k = 0; k < original->num_slots(); ++k) {
      CHECK(original->slot_name(k) == names[k]);
      const bool starts_at_accumulator = names[k] == "accumulator" || names[k] == "n";
      const float initial = starts_at_accumulator ? config.initial_accumulator : 0.0f;
      for (size_t i = 0; i < kSize; ++i) REQUIRE(original->slot(k)[i] == initial);
    }

    Lcg lcg;
    std::vector<float> w = RandomVector(lcg, kSize, 1.0f);
    for (int step = 0; step < 2; ++step)
      original->Update(w.data(), RandomVector(lcg, kSize, 1).data());
    auto restored = Make(config, kSize);
    auto restored_without_steps = Make(config, kSize);
    for (int k = 0; k < original->num_slots(); ++k) {
      std::memcpy(restored->slot(k), original->slot(k), kSize * sizeof(float));
      std::memcpy(restored_without_steps->slot(k), original->slot(k), kSize * sizeof(float));
    }
    restored->set_steps(original->steps());
    std::vector<float> w_restored = w, w_without_steps = w;
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> grad = RandomVector(lcg, kSize, 1.0f);
      original->Update(w.data(), grad.data());
      restored->Update(w_restored.data(), grad.data());
      restored_without_steps->Update(w_without_steps.data(), grad.data());
    }
    CHECK(restored->steps() == 5);
    CHECK(w_restored == w);
    for (int k = 0; k < original->num_slots(); ++k) {
      CHECK(std::memcmp(restored->slot(k), original->slot(k), kSize * sizeof(float)) == 0);
    }
    // Adam's bias correction depends on the step count: it is state too.
    if (config.type == OptimizerType::kAdam) CHECK(w_without_steps != w);
  }
}

TEST_CASE("an empty partition is valid") {
  auto optimizer = Make(Config(OptimizerType::kAdam, 0.01f), 0);
  optimizer->Update(nullptr, nullptr);
  CHECK(optimizer->size() == 0);
  CHECK(optimizer->steps() == 1);
}

TEST_CASE("ValidateOptimizerConfig names the bad field and its value") {
  struct BadField {
    OptimizerType type;
    const char* field;
    void (*set)(OptimizerConfig&);
    const char* got;
  };
  const BadField kBad[] = {
      {OptimizerType::kSgd, "lr", [](OptimizerConfig& c) { c.lr = 0; }, "0"},
      {OptimizerType::kSgd, "lr",
       [](OptimizerConfig& c) { c.lr = std::numeric_limits<float>::quiet_NaN(); }, "nan"},
      {OptimizerType::kSgd, "weight_decay", [](OptimizerConfig& c) { c.weight_decay = -0.5f; },
       "-0.5"},
      {OptimizerType::kMomentum, "momentum", [](OptimizerConfig& c) { c.momentum = 1; }, "1"},
      {OptimizerType::kMomentum, "momentum", [](OptimizerConfig& c) { c.momentum = -0.5f; },
       "-0.5"},
      {OptimizerType::kAdam, "lr",
       [](OptimizerConfig& c) { c.lr = std::numeric_limits<float>::infinity(); }, "inf"},
      {OptimizerType::kAdam, "beta1", [](OptimizerConfig& c) { c.beta1 = 1; }, "1"},
      {OptimizerType::kAdam, "beta2", [](OptimizerConfig& c) { c.beta2 = -0.5f; }, "-0.5"},
      {OptimizerType::kAdam, "epsilon", [](OptimizerConfig& c) { c.epsilon = 0; }, "0"},
      {OptimizerType::kAdagrad, "epsilon", [](OptimizerConfig& c) { c.epsilon = -1; }, "-1"},
      {OptimizerType::kAdagrad, "initial_accumulator",
       [](OptimizerConfig& c) { c.initial_accumulator = -0.5f; }, "-0.5"},
      {OptimizerType::kFtrl, "initial_accumulator",
       [](OptimizerConfig& c) { c.initial_accumulator = 0; }, "0"},
      {OptimizerType::kFtrl, "lr_power", [](OptimizerConfig& c) { c.lr_power = 0.5f; }, "0.5"},
      {OptimizerType::kFtrl, "l1", [](OptimizerConfig& c) { c.l1 = -1; }, "-1"},
      {OptimizerType::kFtrl, "l2", [](OptimizerConfig& c) { c.l2 = -2; }, "-2"},
  };
  for (const BadField& bad : kBad) {
    OptimizerConfig config;
    config.type = bad.type;
    REQUIRE(ValidateOptimizerConfig(config).ok());
    bad.set(config);
    const Status status = ValidateOptimizerConfig(config);
    INFO(status.ToString());
    CHECK(status.code() == StatusCode::kInvalidArgument);
    const std::string prefix = std::string("optimizer ") + OptimizerTypeName(bad.type) + ": ";
    CHECK(status.message().compare(0, prefix.size(), prefix) == 0);
    CHECK(status.message().find(std::string(bad.field) + " must be") != std::string::npos);
    CHECK(status.message().find(std::string("got ") + bad.got) != std::string::npos);
    CHECK(MakeDenseOptimizer(config, 4).status().message() == status.message());
  }
}

TEST_CASE("ValidateOptimizerConfig ignores fields the optimizer does not use") {
  OptimizerConfig config = Config(OptimizerType::kSgd, 0.1f);
  config.momentum = 2;
  config.beta2 = -1;
  config.lr_power = 1;
  CHECK(ValidateOptimizerConfig(config).ok());
}

TEST_CASE("optimizer type names") {
  CHECK(std::string(OptimizerTypeName(OptimizerType::kSgd)) == "sgd");
  CHECK(std::string(OptimizerTypeName(OptimizerType::kMomentum)) == "momentum");
  CHECK(std::string(OptimizerTypeName(OptimizerType::kAdam)) == "adam");
  CHECK(std::string(OptimizerTypeName(OptimizerType::kAdagrad)) == "adagrad");
  CHECK(std::string(OptimizerTypeName(OptimizerType::kFtrl)) == "ftrl");
  CHECK(std::string(OptimizerTypeName(OptimizerType::kAdamW)) == "adamw");
  CHECK(std::string(OptimizerTypeName(OptimizerType::kRmsprop)) == "rmsprop");
  const auto bogus = static_cast<OptimizerType>(42);
  CHECK(std::string(OptimizerTypeName(bogus)) == "unknown");
  OptimizerConfig config;
  config.type = bogus;
  CHECK(ValidateOptimizerConfig(config).message() == "unknown optimizer type 42");
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

TEST_CASE("lr decays by lr_decay every lr_decay_steps updates") {
  OptimizerConfig c;
  c.type = OptimizerType::kSgd;
  c.lr = 1.0f;
  c.lr_decay_steps = 2;
  c.lr_decay = 0.5f;
  auto opt = MakeDenseOptimizer(c, 1);
  REQUIRE(opt.ok());
  float w = 0.0f;
  const float g = 1.0f;
  for (int i = 0; i < 5; ++i) (*opt)->Update(&w, &g);
  CHECK(w == doctest::Approx(-(1 + 1 + 0.5 + 0.5 + 0.25)));
  // Restoring the step count restores the schedule.
  auto again = MakeDenseOptimizer(c, 1);
  (*again)->set_steps(4);
  float w2 = 0.0f;
  (*again)->Update(&w2, &g);
  CHECK(w2 == doctest::Approx(-0.25));

  c.type = OptimizerType::kFtrl;
  CHECK(MakeDenseOptimizer(c, 1).status().message().find("lr_decay_steps") != std::string::npos);
  c.type = OptimizerType::kSgd;
  c.lr_decay = 1.5f;
  CHECK(MakeDenseOptimizer(c, 1).status().message().find("lr_decay") != std::string::npos);
}

// The lr of each of `n` updates, as the kernel schedules them.
std::vector<double> Lrs(const OptimizerConfig& c, int n) {
  REQUIRE(ValidateOptimizerConfig(c).ok());
  OptimizerKernel kernel(c);
  std::vector<double> out;
  for (int u = 0; u < n; ++u) out.push_back(kernel.ScheduledLr(static_cast<uint64_t>(u)));
  return out;
}

TEST_CASE("a linear warm-up, then cosine decay to min_lr, then min_lr") {
  OptimizerConfig c = Config(OptimizerType::kAdamW, 1.0f);
  c.warmup_steps = 4;
  c.cosine_steps = 4;
  c.min_lr = 0.2f;
  // Warm-up: 1/4 .. 4/4. Cosine, by hand: 0.2 + 0.8 * (1 + cos(pi * d / 4)) / 2.
  const std::vector<double> expected = {
      0.25, 0.5, 0.75, 1.0, 1.0, 0.2 + 0.4 * (1 + 0.70710678), 0.6, 0.2 + 0.4 * (1 - 0.70710678),
      0.2,  0.2};
  const std::vector<double> got = Lrs(c, 10);
  for (size_t u = 0; u < got.size(); ++u) {
    INFO("update " << u + 1);
    CHECK(got[u] == doctest::Approx(expected[u]).epsilon(1e-6));
  }
  // The dense optimizer follows it: sgd with gradient 1 moves by the lr.
  c.type = OptimizerType::kSgd;
  auto opt = MakeDenseOptimizer(c, 1);
  REQUIRE(opt.ok());
  float w = 0.0f;
  const float g = 1.0f;
  double sum = 0;
  for (double lr : expected) {
    (*opt)->Update(&w, &g);
    sum += lr;
  }
  CHECK(w == doctest::Approx(-sum).epsilon(1e-6));
}

TEST_CASE("step decay counts updates from the end of the warm-up") {
  OptimizerConfig c = Config(OptimizerType::kRmsprop, 1.0f);
  c.warmup_steps = 2;
  c.lr_decay_steps = 2;
  c.lr_decay = 0.5f;
  const std::vector<double> expected = {0.5, 1.0, 1.0, 1.0, 0.5, 0.5, 0.25};
  const std::vector<double> got = Lrs(c, 7);
  for (size_t u = 0; u < got.size(); ++u) CHECK(got[u] == doctest::Approx(expected[u]));
  // Without a warm-up, cosine starts at lr and reaches 0 by default.
  c = Config(OptimizerType::kSgd, 0.5f);
  c.cosine_steps = 2;
  CHECK(Lrs(c, 3) == std::vector<double>{0.5, 0.25, 0.0});
}

TEST_CASE("a schedule is refused with why: two decays, ftrl, min_lr at or above lr") {
  OptimizerConfig c = Config(OptimizerType::kAdam, 0.1f);
  c.lr_decay_steps = 10;
  c.cosine_steps = 10;
  CHECK(ValidateOptimizerConfig(c).message() ==
        "optimizer adam: lr_decay_steps (10) and cosine_steps (10) are two decays: give one");
  c.lr_decay_steps = 0;
  c.min_lr = 0.1f;
  CHECK(ValidateOptimizerConfig(c).message() ==
        "optimizer adam: min_lr must be >= 0 and below lr, got 0.1");
  c = Config(OptimizerType::kFtrl, 0.1f);
  c.warmup_steps = 5;
  CHECK(ValidateOptimizerConfig(c).message().find("optimizer ftrl: warmup_steps") == 0);
  c = Config(OptimizerType::kRmsprop, 0.1f);
  c.alpha = 1.0f;
  CHECK(ValidateOptimizerConfig(c).message() ==
        "optimizer rmsprop: alpha must be in [0, 1), got 1");
}

}  // namespace
}  // namespace pstrain
