// Tests for the layers gelu, layer_norm, batch_norm, residual and augment
// (src/nn): outputs against values computed apart, running statistics,
// names, refusals. Their gradients are checked with every layer's in
// tests/nn_test.cc.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "src/nn/layers.h"
#include "tests/nn_grad_util.h"

namespace pstrain {
namespace {

using nn_testing::BuildLayer;
using nn_testing::Case;
using nn_testing::CheckAgainstDifferences;
using nn_testing::kSeed;
using nn_testing::Spec;
using nn_testing::WeightedSum;

TEST_CASE("gelu and layer_norm outputs match values computed apart (python3, in double)") {
  auto gelu = BuildLayer(Case(Spec(LayerType::kGelu), {4}, 1));
  Tensor in({1, 4}), out;
  in.data = {1.0f, -1.0f, 0.5f, -3.0f};
  gelu->Forward(Batch{}, in, &out, true);
  const float kGelu[] = {0.841344746f, -0.158655254f, 0.345731231f, -0.00404969409f};
  for (int i = 0; i < 4; ++i) CHECK(out.data[i] == doctest::Approx(kGelu[i]).epsilon(1e-6));

  // Weights other than the initial 1 and 0, and their gradients through a
  // finite difference of the same weighted loss.
  auto norm = BuildLayer(Case(Spec(LayerType::kLayerNorm), {3}, 1));
  std::vector<Param*> params = norm->Params();
  REQUIRE(params.size() == 2);
  CHECK(params[0]->value.data == FloatBuffer{1.0f, 1.0f, 1.0f});
  params[0]->value.data = {2.0f, -1.0f, 0.5f};
  params[1]->value.data = {0.1f, 0.0f, -0.2f};
  in = Tensor({1, 3});
  in.data = {1.0f, 2.0f, 4.0f};
  norm->Forward(Batch{}, in, &out, true);
  const float kNorm[] = {-2.03808306f, 0.267260383f, 0.468150957f};
  for (int i = 0; i < 3; ++i) CHECK(out.data[i] == doctest::Approx(kNorm[i]).epsilon(1e-5));
  Tensor dout({1, 3}), din;
  dout.data = {0.3f, -0.7f, 1.1f};
  norm->Backward(Batch{}, in, out, dout, &din);
  auto loss = [&] {
    Tensor o;
    norm->Forward(Batch{}, in, &o, true);
    return WeightedSum(o, dout.data);
  };
  CheckAgainstDifferences(&in.data, din.data, loss, 3e-3f, "input");
  CheckAgainstDifferences(&params[0]->value.data, FloatBuffer(params[0]->grad.data), loss, 3e-3f,
                          "weight");
}

TEST_CASE("batch_norm: batch statistics in training, running ones in evaluation") {
  LayerConfig c = Spec(LayerType::kBatchNorm);
  c.momentum = 0.5f;
  auto layer = BuildLayer(Case(c, {2}, 3));
  std::vector<Param*> params = layer->Params();
  REQUIRE(params.size() == 4);
  CHECK(params[2]->name == "batch_norm.running_mean");
  CHECK(params[3]->name == "batch_norm.running_var");
  CHECK(params[0]->trainable);
  CHECK_FALSE(params[2]->trainable);
  CHECK_FALSE(params[3]->trainable);
  CHECK(params[3]->value.data == FloatBuffer{1.0f, 1.0f});
  // Channel 0 holds 1, 2, 6 (mean 3, biased variance 14/3, unbiased 7);
  // channel 1 holds 4 three times (variance 0).
  Tensor in({3, 2}), out;
  in.data = {1.0f, 4.0f, 2.0f, 4.0f, 6.0f, 4.0f};
  layer->Forward(Batch{}, in, &out, /*training=*/true);
  const double inv_std = 1.0 / std::sqrt(14.0 / 3.0 + 1e-5);
  CHECK(out.data[0] == doctest::Approx(-2.0 * inv_std));
  CHECK(out.data[4] == doctest::Approx(3.0 * inv_std));
  CHECK(out.data[1] == 0.0f);
  // Halfway (momentum 0.5) from 0 and 1 toward the batch's mean and
  // unbiased variance.
  CHECK(params[2]->value.data[0] == doctest::Approx(1.5));
  CHECK(params[2]->value.data[1] == doctest::Approx(2.0));
  CHECK(params[3]->value.data[0] == doctest::Approx(4.0));
  CHECK(params[3]->value.data[1] == doctest::Approx(0.5));
  // Evaluation: the running statistics, the batch's own ignored.
  layer->Forward(Batch{}, in, &out, /*training=*/false);
  CHECK(out.data[0] == doctest::Approx((1.0 - 1.5) / std::sqrt(4.0 + 1e-5)));
  CHECK(out.data[1] == doctest::Approx((4.0 - 2.0) / std::sqrt(0.5 + 1e-5)));
  CHECK(params[2]->value.data[0] == doctest::Approx(1.5));  // unchanged
  // A batch of one sample: no variance to learn from; the running
  // statistics keep what they had, the output is the bias.
  params[1]->value.data = {0.25f, -0.5f};
  Tensor one({1, 2});
  one.data = {7.0f, -3.0f};
  layer->Forward(Batch{}, one, &out, /*training=*/true);
  CHECK(out.data == FloatBuffer{0.25f, -0.5f});
  CHECK(params[2]->value.data[0] == doctest::Approx(1.5));
  CHECK(params[3]->value.data[1] == doctest::Approx(0.5));
}

TEST_CASE("a residual block adds its input, names its layers after it, and says what misfits") {
  LayerConfig block = Spec(LayerType::kResidual);
  block.name = "block";
  LayerConfig linear = Spec(LayerType::kLinear);
  linear.name.clear();
  linear.out = 2;
  block.layers = {linear};
  auto layer = BuildLayer(Case(block, {2}, 1));
  std::vector<Param*> params = layer->Params();
  REQUIRE(params.size() == 2);
  CHECK(params[0]->name == "block.linear0.weight");
  CHECK(params[1]->name == "block.linear0.bias");
  params[0]->value.data = {1.0f, 2.0f, 3.0f, 4.0f};
  params[1]->value.data = {0.5f, -0.5f};
  Tensor in({1, 2}), out;
  in.data = {1.0f, -1.0f};
  layer->Forward(Batch{}, in, &out, true);
  // W x + b = [1 - 2 + 0.5, 3 - 4 - 0.5] = [-0.5, -1.5]; plus x.
  CHECK(out.data == FloatBuffer{0.5f, -2.5f});

  block.layers[0].out = 3;
  auto misfit = CreateLayer(block, LayerContext{});
  REQUIRE(misfit.ok());
  CHECK((*misfit)->Build({2}, kSeed).status().message() ==
        "the body's output [3] differs from the block's input [2]: add a projection that makes it");
  block.projection = {linear};
  block.projection[0].out = 4;
  auto projected = CreateLayer(block, LayerContext{});
  REQUIRE(projected.ok());
  CHECK((*projected)->Build({2}, kSeed).status().message() ==
        "the body's output [3] differs from the projection's [4]");
}

TEST_CASE("augment: mirrored and shifted copies of each image in training, itself in evaluation") {
  LayerConfig c = Spec(LayerType::kAugment);
  c.flip = "horizontal";
  c.crop_pad = 2;
  const int64_t kImages = 64;
  auto layer = BuildLayer(Case(c, {1, 3, 3}, kImages));
  Tensor in({kImages, 1, 3, 3}), out, again;
  for (size_t i = 0; i < in.data.size(); ++i) in.data[i] = static_cast<float>(i % 9 + 1);
  layer->Forward(Batch{}, in, &out, /*training=*/false);
  CHECK(out.data == in.data);
  layer->SetTrainingForwards(7);
  layer->Forward(Batch{}, in, &out, /*training=*/true);
  layer->SetTrainingForwards(7);
  layer->Forward(Batch{}, in, &again, /*training=*/true);
  CHECK(out.data == again.data);  // the k-th Forward draws the same
  // Each output image is the input (1..9 row by row), mirrored or not,
  // shifted by (dy, dx) in -2..2 with zeros coming in.
  int mirrored = 0, shifted = 0;
  for (int64_t n = 0; n < kImages; ++n) {
    const float* o = out.ptr() + n * 9;
    bool found = false;
    for (int flip = 0; flip < 2 && !found; ++flip)
      for (int dy = -2; dy <= 2 && !found; ++dy)
        for (int dx = -2; dx <= 2 && !found; ++dx) {
          bool same = true;
          for (int y = 0; y < 3; ++y)
            for (int x = 0; x < 3; ++x) {
              const int sy = y + dy, cx = x + dx, sx = flip ? 2 - cx : cx;
              const bool inside = sy >= 0 && sy < 3 && cx >= 0 && cx < 3;
              same = same && o[y * 3 + x] == (inside ? static_cast<float>(sy * 3 + sx + 1) : 0.0f);
            }
          if (!same) continue;
          found = true;
          mirrored += flip;
          shifted += dy != 0 || dx != 0;
        }
    CHECK_MESSAGE(found, "image " << n << " is no flip and crop of the input");
  }
  // About half mirrored, most shifted (24 of 25 offsets move the image).
  CHECK(mirrored > kImages / 4);
  CHECK(mirrored < 3 * kImages / 4);
  CHECK(shifted > kImages / 2);

  c.crop_pad = 0;
  c.flip = "none";
  CHECK(CreateLayer(c, LayerContext{}).status().message() ==
        "augment needs flip: horizontal or a crop (it would change nothing)");
  c.flip = "horizontal";
  auto flat = CreateLayer(c, LayerContext{});
  REQUIRE(flat.ok());
  CHECK((*flat)->Build({9}, kSeed).status().message() ==
        "augment expects images [C, H, W], got [9]");
}

}  // namespace
}  // namespace pstrain
