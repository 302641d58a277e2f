// Optimizer updates computed apart from the code under test (python3, in
// double, from the formulas of optim/dense_optimizer.h): three weights, three
// steps, each optimizer and its options. The dense optimizers (optim_test)
// and the sparse row updates (embedding_test) must both give these numbers.
#pragma once

#include <array>
#include <vector>

#include "src/common/config/optimizer_config.h"

namespace pstrain {
namespace testing {

using Vec3 = std::array<float, 3>;

// One weight negative; the last gradient is always zero, so that weight moves
// only through weight decay (or FTRL, which sets it from z alone).
constexpr Vec3 kInitialWeights = {0.5f, -1.0f, 2.0f};
constexpr std::array<Vec3, 3> kGrads = {
    {{0.1f, -0.2f, 0.0f}, {0.3f, 0.1f, 0.0f}, {-0.2f, 0.4f, 0.0f}}};

struct LiteralCase {
  const char* name;
  OptimizerConfig config;
  std::array<Vec3, 3> expected;  // weights after each step
};

inline OptimizerConfig Config(OptimizerType type, float lr, float weight_decay = 0.0f) {
  OptimizerConfig c;
  c.type = type;
  c.lr = lr;
  c.weight_decay = weight_decay;
  return c;
}

inline std::vector<LiteralCase> LiteralCases() {
  std::vector<LiteralCase> cases;
  OptimizerConfig c = Config(OptimizerType::kSgd, 0.1f);
  cases.push_back(
      {"sgd", c, {{{0.49f, -0.98f, 2.0f}, {0.46f, -0.99f, 2.0f}, {0.48f, -1.03f, 2.0f}}}});
  c.weight_decay = 0.01f;
  cases.push_back({"sgd weight decay",
                   c,
                   {{{0.4895f, -0.979f, 1.998f},
                     {0.4590105f, -0.988021f, 1.996002f},
                     {0.478551489f, -1.02703298f, 1.994006f}}}});
  c = Config(OptimizerType::kMomentum, 0.1f);
  c.momentum = 0.9f;
  cases.push_back({"momentum",
                   c,
                   {{{0.49f, -0.98f, 2.0f}, {0.451f, -0.972f, 2.0f}, {0.4359f, -1.0048f, 2.0f}}}});
  c.weight_decay = 0.01f;
  cases.push_back({"momentum weight decay",
                   c,
                   {{{0.4895f, -0.979f, 1.998f},
                     {0.4495605f, -0.969121f, 1.994202f},
                     {0.433165389f, -0.999260779f, 1.9887896f}}}});
  c.nesterov = true;
  cases.push_back({"nesterov weight decay",
                   c,
                   {{{0.48005f, -0.9601f, 1.9962f},
                     {0.413632905f, -0.96026581f, 1.99078722f},
                     {0.418503662f, -1.02645462f, 1.9839298f}}}});
  c = Config(OptimizerType::kAdam, 0.01f);  // beta1 0.9, beta2 0.999, epsilon 1e-8
  cases.push_back({"adam",
                   c,
                   {{{0.490000001f, -0.99f, 2.0f},
                     {0.48082219f, -0.98733663f, 2.0f},
                     {0.478243152f, -0.991909948f, 2.0f}}}});
  c = Config(OptimizerType::kAdam, 0.01f, 0.1f);
  c.beta1 = 0.8f;
  c.beta2 = 0.99f;
  c.epsilon = 1e-6f;
  cases.push_back({"adam weight decay",
                   c,
                   {{{0.490000067f, -0.990000033f, 1.99000005f},
                     {0.480316632f, -0.983725107f, 1.98000279f},
                     {0.476443613f, -0.985567641f, 1.97001f}}}});
  // Decay apart from the gradient: the third weight, whose gradient is 0,
  // shrinks by lr * weight_decay alone.
  c = Config(OptimizerType::kAdamW, 0.01f, 0.1f);
  cases.push_back({"adamw",
                   c,
                   {{{0.489500001f, -0.989f, 1.998f},
                     {0.47983269f, -0.98534763f, 1.996002f},
                     {0.47677382f, -0.9889356f, 1.994006f}}}});
  c = Config(OptimizerType::kAdamW, 0.01f, 0.01f);
  c.beta1 = 0.8f;
  c.beta2 = 0.99f;
  c.epsilon = 1e-6f;
  cases.push_back({"adamw betas epsilon",
                   c,
                   {{{0.4899501f, -0.98990005f, 1.9998f},
                     {0.480478891f, -0.987689703f, 1.99960002f},
                     {0.478459899f, -0.993027887f, 1.99940006f}}}});
  c = Config(OptimizerType::kRmsprop, 0.01f);  // alpha 0.99, epsilon 1e-8
  cases.push_back({"rmsprop",
                   c,
                   {{{0.4000001f, -0.90000005f, 2.0f},
                     {0.30508433f, -0.944901355f, 2.0f},
                     {0.358747608f, -1.0323753f, 2.0f}}}});
  c = Config(OptimizerType::kRmsprop, 0.01f, 0.05f);
  c.alpha = 0.9f;
  cases.push_back({"rmsprop alpha weight decay",
                   c,
                   {{{0.468377231f, -0.968377227f, 1.96837723f},
                     {0.438687314f, -0.975097611f, 1.94560965f},
                     {0.453817694f, -1.00154422f, 1.9266337f}}}});
  c = Config(OptimizerType::kAdagrad, 0.1f);  // initial_accumulator 0.1, epsilon 1e-8
  cases.push_back({"adagrad",
                   c,
                   {{{0.469848866f, -0.946547753f, 2.0f},
                     {0.402766829f, -0.972367641f, 2.0f},
                     {0.443591657f, -1.04420976f, 2.0f}}}});
  c = Config(OptimizerType::kAdagrad, 0.1f, 0.05f);
  c.initial_accumulator = 0.0f;
  cases.push_back({"adagrad weight decay",
                   c,
                   {{{0.400000008f, -0.900000004f, 1.90000001f},
                     {0.306854276f, -0.921486181f, 1.83112507f},
                     {0.354198668f, -1.00251436f, 1.77582153f}}}});
  c = Config(OptimizerType::kFtrl, 0.1f);  // initial_accumulator 0.1, lr_power -0.5
  cases.push_back({"ftrl",
                   c,
                   {{{-0.00688242908f, -0.101393497f, 0.0f},
                     {-0.0739644684f, -0.127213386f, 0.0f},
                     {-0.0331396394f, -0.199055507f, 0.0f}}}});
  // |z| of the first weight is 0.13 after steps 1 and 3: l1 = 0.2 zeroes it.
  c.l1 = 0.2f;
  c.l2 = 0.01f;
  cases.push_back({"ftrl l1 l2",
                   c,
                   {{{0.0f, -0.0476863542f, 0.0f},
                     {-0.0273425462f, -0.0733735949f, 0.0f},
                     {0.0f, -0.144958575f, 0.0f}}}});
  c = Config(OptimizerType::kFtrl, 0.1f, 0.01f);
  c.lr_power = -0.6f;
  c.l1 = 0.01f;
  c.l2 = 0.05f;
  cases.push_back({"ftrl lr_power -0.6 weight decay",
                   c,
                   {{{-0.00492432322f, -0.122577949f, 0.0f},
                     {-0.0814684099f, -0.152037385f, 0.0f},
                     {-0.0354253858f, -0.230513792f, 0.0f}}}});
  return cases;
}

}  // namespace testing
}  // namespace pstrain
