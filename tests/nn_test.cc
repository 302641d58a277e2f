// Tests for src/nn: every layer's gradients against central finite
// differences, the losses, training that actually lowers the loss, the
// messages of Model::Build, and seeded initialization. A LeNet throughput
// benchmark is here too, skipped by default:
//   ./nn_test -tc='*throughput*' --no-skip
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "src/nn/layers.h"
#include "src/nn/loss.h"
#include "src/nn/model.h"
#include "tests/lenet_config.h"

namespace pstrain {
namespace {

constexpr uint64_t kSeed = 42;

FloatBuffer Uniform(size_t count, std::mt19937* rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  FloatBuffer v(count);
  for (float& x : v) x = dist(*rng);
  return v;
}

// Distinct values spaced 4 / count apart in (-2, 2), none near 0: a step of
// eps < 2 / count never crosses a kink of relu or changes a max's winner.
FloatBuffer Distinct(size_t count, std::mt19937* rng) {
  FloatBuffer v(count);
  for (size_t i = 0; i < count; ++i) v[i] = -2.0f + (i + 0.5f) * 4.0f / count;
  std::shuffle(v.begin(), v.end(), *rng);
  return v;
}

Shape WithBatch(int64_t n, const Shape& sample) {
  Shape s{n};
  s.insert(s.end(), sample.begin(), sample.end());
  return s;
}

// A loss in which every output matters: sum(out * w), summed in double so
// that rounding hardly blurs the finite differences.
double WeightedSum(const Tensor& out, const FloatBuffer& w) {
  double sum = 0.0;
  for (size_t i = 0; i < w.size(); ++i) sum += static_cast<double>(out.data[i]) * w[i];
  return sum;
}

// |a - b| / max(|a| + |b|, 1e-2): relative where gradients are large, and
// an absolute 1e-5 bound where they are near zero (where a relative error
// would only measure float noise).
double RelativeError(double a, double b) {
  return std::fabs(a - b) / std::max(std::fabs(a) + std::fabs(b), 1e-2);
}

// Compares `analytic` with central differences of `loss` in each element of *x.
void CheckAgainstDifferences(FloatBuffer* x, const FloatBuffer& analytic,
                             const std::function<double()>& loss, float eps,
                             const std::string& what) {
  REQUIRE(x->size() == analytic.size());
  double worst = 0.0;
  size_t worst_at = 0;
  double worst_numeric = 0.0;
  for (size_t i = 0; i < x->size(); ++i) {
    const float saved = (*x)[i];
    const float up = saved + eps, down = saved - eps;
    (*x)[i] = up;
    const double loss_up = loss();
    (*x)[i] = down;
    const double loss_down = loss();
    (*x)[i] = saved;
    const double numeric = (loss_up - loss_down) / (static_cast<double>(up) - down);
    const double error = RelativeError(numeric, analytic[i]);
    if (error > worst) {
      worst = error;
      worst_at = i;
      worst_numeric = numeric;
    }
  }
  INFO(what << ": worst element " << worst_at << " analytic " << analytic[worst_at] << " numeric "
            << worst_numeric);
  CHECK(worst < 1e-3);
}

struct GradCase {
  LayerConfig config;
  Shape sample;           // one sample's input shape
  int64_t n = 2;          // batch size
  float eps = 1e-2f;      // linear layers are exact at any step; curved ones need less
  bool distinct = false;  // inputs from Distinct(): no kink crossed
  Shape dense;            // concat: the model's dense input
  // dropout: the mask changes with every Forward, so each evaluation uses a
  // fresh layer, whose first Forward draws the same mask as the one checked.
  bool fresh_layer = false;

  GradCase Eps(float e) const { return With(&GradCase::eps, e); }
  GradCase DistinctInputs() const { return With(&GradCase::distinct, true); }
  GradCase Dense(Shape d) const { return With(&GradCase::dense, std::move(d)); }
  GradCase FreshLayer() const { return With(&GradCase::fresh_layer, true); }

 private:
  template <typename T>
  GradCase With(T GradCase::*field, T value) const {
    GradCase c = *this;
    c.*field = std::move(value);
    return c;
  }
};

GradCase Case(const LayerConfig& config, const Shape& sample, int64_t n = 2) {
  GradCase c;
  c.config = config;
  c.sample = sample;
  c.n = n;
  return c;
}

LayerConfig Spec(LayerType type) {
  LayerConfig c;
  c.type = type;
  c.name = LayerTypeName(type);
  return c;
}

std::unique_ptr<Layer> BuildLayer(const GradCase& c) {
  auto layer = CreateLayer(c.config, LayerContext{c.dense});
  REQUIRE(layer.ok());
  auto shape = (*layer)->Build(c.sample, kSeed);
  INFO(shape.status().ToString());
  REQUIRE(shape.ok());
  return std::move(*layer);
}

// Three samples of three ids each, every sample repeating an id.
Batch SparseBatch() {
  Batch b;
  b.fields = 3;
  b.sparse = {2, 2, 5, 0, 3, 3, 1, 1, 1};
  b.labels = {0, 1, 0};
  return b;
}

void CheckLayerGradients(const GradCase& c) {
  INFO("layer " << LayerTypeName(c.config.type) << " " << c.config.name);
  std::mt19937 rng(7);
  auto layer = BuildLayer(c);
  const bool ids = c.config.type == LayerType::kEmbeddingBag;
  Batch batch = ids ? SparseBatch() : Batch{};
  const int64_t n = ids ? 3 : c.n;
  batch.dense = Tensor(WithBatch(n, c.dense));
  batch.dense.data = Uniform(batch.dense.data.size(), &rng);
  Tensor in(WithBatch(n, c.sample));
  in.data = c.distinct ? Distinct(in.data.size(), &rng) : Uniform(in.data.size(), &rng);

  Tensor out;
  layer->Forward(batch, in, &out, true);
  const FloatBuffer w = Uniform(out.data.size(), &rng);
  Tensor dout(out.shape);
  dout.data = w;
  Tensor din;
  layer->Backward(batch, in, out, dout, &din);

  auto loss = [&] {
    Tensor o;
    if (c.fresh_layer) {
      BuildLayer(c)->Forward(batch, in, &o, true);
    } else {
      layer->Forward(batch, in, &o, true);
    }
    return WeightedSum(o, w);
  };
  if (!ids) {  // an embedding_bag's input is the ids
    CheckAgainstDifferences(&in.data, din.data, loss, c.eps, "input");
  }
  for (Param* p : layer->Params()) {
    const FloatBuffer analytic = p->grad.data;
    CheckAgainstDifferences(&p->value.data, analytic, loss, c.eps, p->name);
  }
}

TEST_CASE("every layer's gradients match finite differences") {
  std::vector<GradCase> cases;
  LayerConfig c = Spec(LayerType::kLinear);
  c.out = 4;
  cases.push_back(Case(c, {3, 2}, 3));
  c.bias = false;
  cases.push_back(Case(c, {5}));
  c = Spec(LayerType::kConv2d);
  c.out_channels = 3;
  c.kernel = 3;
  cases.push_back(Case(c, {2, 5, 5}));
  c.stride = 2;
  c.padding = 1;
  cases.push_back(Case(c, {2, 6, 5}));
  c.kernel = 4;
  c.padding = 2;
  c.bias = false;
  cases.push_back(Case(c, {1, 5, 7}));
  c = Spec(LayerType::kMaxpool);
  c.kernel = 2;
  cases.push_back(Case(c, {2, 4, 4}).DistinctInputs());
  c.kernel = 3;
  c.stride = 2;
  c.padding = 1;
  cases.push_back(Case(c, {2, 5, 5}).DistinctInputs());
  c = Spec(LayerType::kAvgpool);
  c.kernel = 2;
  c.stride = 1;
  c.padding = 1;
  cases.push_back(Case(c, {2, 4, 3}));
  cases.push_back(Case(Spec(LayerType::kRelu), {3, 4}, 3).DistinctInputs());
  cases.push_back(Case(Spec(LayerType::kSigmoid), {7}, 3).Eps(3e-3f));
  cases.push_back(Case(Spec(LayerType::kTanh), {7}, 3).Eps(3e-3f));
  cases.push_back(Case(Spec(LayerType::kGelu), {7}, 3).Eps(3e-3f));
  cases.push_back(Case(Spec(LayerType::kLayerNorm), {6}, 3).Eps(3e-3f));
  cases.push_back(Case(Spec(LayerType::kLayerNorm), {2, 3, 2}, 2).Eps(3e-3f));
  // A block adding its input, and one adding a projection of it.
  c = Spec(LayerType::kResidual);
  LayerConfig linear = Spec(LayerType::kLinear);
  linear.name.clear();
  linear.out = 5;
  c.layers = {linear, Spec(LayerType::kTanh)};
  c.layers[1].name.clear();
  cases.push_back(Case(c, {5}, 3).Eps(3e-3f));
  LayerConfig conv = Spec(LayerType::kConv2d);
  conv.out_channels = 3;
  conv.kernel = 1;
  conv.stride = 2;
  c.layers = {conv, Spec(LayerType::kGelu)};
  c.projection = {conv};
  c.layers[0].kernel = 3;
  c.layers[0].padding = 1;
  cases.push_back(Case(c, {2, 4, 4}, 2).Eps(3e-3f));
  cases.push_back(Case(Spec(LayerType::kFlatten), {2, 3, 2}));
  cases.push_back(Case(Spec(LayerType::kConcat), {4}, 3).Dense({3}));
  c = Spec(LayerType::kDropout);
  c.rate = 0.4f;
  cases.push_back(Case(c, {4, 5}).FreshLayer());
  cases.push_back(Case(Spec(LayerType::kBatchNorm), {3}, 4).Eps(3e-3f));
  cases.push_back(Case(Spec(LayerType::kBatchNorm), {2, 3, 2}, 3).Eps(3e-3f));
  c = Spec(LayerType::kAugment);
  c.flip = "horizontal";
  c.crop_pad = 1;
  cases.push_back(Case(c, {2, 4, 3}, 4).FreshLayer());
  for (const char* mode : {"sum", "mean", "concat"}) {
    c = Spec(LayerType::kEmbeddingBag);
    c.vocab = 6;
    c.dim = 4;
    c.mode = mode;
    cases.push_back(Case(c, {3}));
  }
  for (const GradCase& gc : cases) CheckLayerGradients(gc);
}

// One element of an [N, C, H, W] tensor, or `pad` outside it.
float Pixel(const Tensor& t, int64_t n, int64_t c, int64_t h, int64_t w, float pad) {
  if (h < 0 || w < 0 || h >= t.dim(2) || w >= t.dim(3)) return pad;
  return t.data[((n * t.dim(1) + c) * t.dim(2) + h) * t.dim(3) + w];
}

// Output (n, o, i, j) of a conv2d, maxpool or avgpool layer `c`, computed
// directly from its window (c.stride must be set: no defaults here).
double Direct(const LayerConfig& c, const std::vector<Param*>& params, const Tensor& in, int64_t n,
              int64_t o, int64_t i, int64_t j) {
  const bool max = c.type == LayerType::kMaxpool, conv = c.type == LayerType::kConv2d;
  const int64_t k = c.kernel, channels = in.dim(1);
  double result = max ? -1e30 : conv ? params[1]->value.data[o] : 0.0;
  // conv2d sums over every input channel; a pool reads channel o alone.
  for (int64_t ch = conv ? 0 : o; ch < (conv ? channels : o + 1); ++ch) {
    for (int64_t di = 0; di < k; ++di) {
      for (int64_t dj = 0; dj < k; ++dj) {
        const int64_t h = i * c.stride - c.padding + di, w = j * c.stride - c.padding + dj;
        const double v = Pixel(in, n, ch, h, w, max ? -1e30f : 0.0f);
        if (conv) {
          result += params[0]->value.data[((o * channels + ch) * k + di) * k + dj] * v;
        } else {
          result = max ? std::max(result, v) : result + v / static_cast<double>(k * k);
        }
      }
    }
  }
  return result;
}

// Gradients checked against a wrong forward would agree with it: these pin
// the forward passes with windows to direct loops over each output's window.
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

TEST_CASE("conv2d and pooling outputs match direct loops") {
  std::mt19937 rng(9);
  auto window = [](LayerType type, int kernel, int stride, int padding) {
    LayerConfig c = Spec(type);
    c.out_channels = 3;
    c.kernel = kernel;
    c.stride = stride;
    c.padding = padding;
    return c;
  };
  for (const LayerConfig& c :
       {window(LayerType::kConv2d, 3, 2, 1), window(LayerType::kConv2d, 5, 1, 2),
        window(LayerType::kMaxpool, 3, 2, 1), window(LayerType::kMaxpool, 2, 1, 0),
        window(LayerType::kAvgpool, 2, 1, 1)}) {
    auto layer = BuildLayer(Case(c, {2, 6, 5}));
    const auto params = layer->Params();
    if (!params.empty()) params[1]->value.data = Uniform(3, &rng);  // a non-zero bias
    Tensor in({2, 2, 6, 5}), out;
    in.data = Uniform(in.data.size(), &rng);
    layer->Forward(Batch{}, in, &out, false);
    const Shape& s = out.shape;
    for (int64_t at = 0; at < out.size(); ++at) {
      const int64_t j = at % s[3], i = at / s[3] % s[2], o = at / (s[3] * s[2]) % s[1];
      INFO(LayerTypeName(c.type) << " k" << c.kernel << " output " << at);
      CHECK(
          out.data[at] ==
          doctest::Approx(Direct(c, params, in, at / (s[1] * s[2] * s[3]), o, i, j)).epsilon(1e-5));
    }
  }
}

TEST_CASE("losses: gradients match finite differences, and large logits stay finite") {
  std::mt19937 rng(3);
  for (LossType type : {LossType::kSoftmaxCrossEntropy, LossType::kBceWithLogits, LossType::kMse}) {
    const int64_t classes = type == LossType::kSoftmaxCrossEntropy ? 5 : 1;
    Tensor logits({4, classes});
    logits.data = Uniform(logits.data.size(), &rng, -3.0f, 3.0f);
    const std::vector<float> labels =
        type == LossType::kSoftmaxCrossEntropy ? std::vector<float>{0, 4, 2, 2}
        : type == LossType::kMse               ? std::vector<float>{-1.5f, 0.25f, 7, 0}
                                               : std::vector<float>{0, 1, 1, 0};
    Tensor grad;
    REQUIRE(MeanLoss(type, logits, labels, &grad).ok());
    REQUIRE(grad.shape == logits.shape);
    CheckAgainstDifferences(
        &logits.data, grad.data, [&] { return MeanLoss(type, logits, labels, nullptr).value(); },
        1e-2f, "loss");
  }
  Tensor big({2, 2});
  big.data = {1000.0f, 0.0f, 0.0f, 1000.0f};
  CHECK(MeanLoss(LossType::kSoftmaxCrossEntropy, big, {0, 0}, nullptr).value() ==
        doctest::Approx(500.0f));
  Tensor one({2, 1});
  one.data = {-1000.0f, 1000.0f};
  CHECK(MeanLoss(LossType::kBceWithLogits, one, {1, 1}, nullptr).value() ==
        doctest::Approx(500.0f));
  one.data = {std::log(3.0f), 0.0f};  // sigmoid = 0.75 and 0.5
  Tensor grad;
  CHECK(MeanLoss(LossType::kBceWithLogits, one, {1, 0}, &grad).value() ==
        doctest::Approx((-std::log(0.75) + std::log(2.0)) / 2));
  CHECK(grad.data[0] == doctest::Approx(-0.125f));
  CHECK(grad.data[1] == doctest::Approx(0.25f));
  // mse by hand: ((2 - 0.5)^2 + (-1 - 1)^2) / 2, gradient 2 (x - y) / 2.
  one.data = {2.0f, -1.0f};
  CHECK(MeanLoss(LossType::kMse, one, {0.5f, 1.0f}, &grad).value() == doctest::Approx(3.125));
  CHECK(grad.data == FloatBuffer{1.5f, -2.0f});
  CHECK(MeanLoss(LossType::kMse, one, {0.5f, std::nanf("")}, nullptr).status().message() ==
        "label nan of sample 1: mse needs finite labels");
  CHECK(MeanLoss(LossType::kMse, big, {0.5f, 1.0f}, nullptr).status().message() ==
        "mse needs one output a row, got 2");
}

TEST_CASE("dropout: seeded masks, scaled by 1 / (1 - rate); identity in evaluation") {
  GradCase c = Case(Spec(LayerType::kDropout), {1000}, 1);
  c.config.rate = 0.3f;
  auto a = BuildLayer(c), b = BuildLayer(c);
  Tensor in({1, 1000}), first, second, again, eval;
  std::fill(in.data.begin(), in.data.end(), 1.0f);
  a->Forward(Batch{}, in, &first, true);
  a->Forward(Batch{}, in, &second, true);
  b->Forward(Batch{}, in, &again, true);
  a->Forward(Batch{}, in, &eval, false);
  const auto zeros = std::count(first.data.begin(), first.data.end(), 0.0f);
  CHECK(zeros > 230);
  CHECK(zeros < 370);
  for (float v : first.data) CHECK((v == 0.0f || v == doctest::Approx(1.0f / 0.7f)));
  CHECK(first.data == again.data);   // same seed, name and counter
  CHECK(first.data != second.data);  // the counter moved
  CHECK(eval.data == in.data);
}

// The parameters' values, by position.
std::vector<std::vector<float>> Values(const Model& model) {
  std::vector<std::vector<float>> v;
  for (const Param* p : model.params()) v.emplace_back(p->value.data.begin(), p->value.data.end());
  return v;
}

std::unique_ptr<Model> MustBuild(const ModelConfig& config, uint64_t seed = kSeed) {
  auto model = Model::Build(config, seed);
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  return std::move(*model);
}

std::string BuildError(const ModelConfig& config) {
  auto model = Model::Build(config, kSeed);
  REQUIRE_FALSE(model.ok());
  CHECK(model.status().code() == StatusCode::kInvalidArgument);
  return model.status().message();
}

LayerConfig Linear(int64_t out, const std::string& name = "") {
  LayerConfig c = Spec(LayerType::kLinear);
  c.name = name;
  c.out = out;
  return c;
}

void SgdUpdate(Model* model, float lr) {
  for (Param* p : model->params()) {
    for (size_t i = 0; i < p->value.data.size(); ++i) p->value.data[i] -= lr * p->grad.data[i];
  }
}

// Full-batch SGD; returns the loss before and after.
std::pair<float, float> Train(Model* model, const Batch& batch, int steps, float lr) {
  const float before = model->Loss(model->Forward(batch, false), batch).value();
  for (int step = 0; step < steps; ++step) {
    model->Forward(batch, true);
    const float loss = model->Backward(batch).value();
    if (step == 0) CHECK(loss == doctest::Approx(before));
    SgdUpdate(model, lr);
  }
  return {before, model->Loss(model->Forward(batch, false), batch).value()};
}

// 64 samples of 3 classes around fixed centers (MLP) or with a bright 2x2
// blob in the left, middle or right of a 6x6 image (conv net).
Batch Separable(bool images) {
  std::mt19937 rng(11);
  Batch b;
  b.dense = Tensor(images ? Shape{64, 1, 6, 6} : Shape{64, 4});
  b.dense.data = Uniform(b.dense.data.size(), &rng, -0.2f, 0.2f);
  const float centers[3][4] = {{1, 0, 0, 1}, {0, 1, 0, -1}, {-1, -1, 1, 0}};
  for (int s = 0; s < 64; ++s) {
    const int label = s % 3;
    b.labels.push_back(static_cast<float>(label));
    float* x = b.dense.ptr() + s * (images ? 36 : 4);
    if (!images) {
      for (int f = 0; f < 4; ++f) x[f] += centers[label][f];
      continue;
    }
    const int row = static_cast<int>(rng() % 5), col = label * 2;
    for (int dr = 0; dr < 2; ++dr) {
      for (int dc = 0; dc < 2; ++dc) x[(row + dr) * 6 + col + dc] += 1.0f;
    }
  }
  return b;
}

TEST_CASE("training lowers the loss: an MLP and a conv net on separable data") {
  ModelConfig mlp;
  mlp.input = {4};
  mlp.layers = {Linear(16), Spec(LayerType::kRelu), Linear(3)};
  auto model = MustBuild(mlp);
  const auto mlp_loss = Train(model.get(), Separable(false), 100, 0.1f);
  CHECK(mlp_loss.second < mlp_loss.first / 10);

  ModelConfig cnn;
  cnn.input = {1, 6, 6};
  LayerConfig conv = Spec(LayerType::kConv2d), pool = Spec(LayerType::kMaxpool);
  conv.out_channels = 4;
  conv.kernel = 3;
  conv.padding = 1;
  pool.kernel = 2;
  cnn.layers = {conv, Spec(LayerType::kRelu), pool, Spec(LayerType::kFlatten), Linear(3)};
  for (LayerConfig& c : cnn.layers) c.name.clear();  // default names
  model = MustBuild(cnn);
  const auto cnn_loss = Train(model.get(), Separable(true), 100, 0.1f);
  CHECK(cnn_loss.second < cnn_loss.first / 10);
}

// Click-like data: the label is whether the first id is below 5.
TEST_CASE("wide & deep: towers summed into one logit, trained with bce") {
  ModelConfig config;
  config.input = {3};
  config.sparse_fields = 2;
  config.loss = LossType::kBceWithLogits;
  LayerConfig wide = Spec(LayerType::kEmbeddingBag), deep = Spec(LayerType::kEmbeddingBag);
  wide.name = deep.name = "";
  wide.vocab = deep.vocab = 10;
  wide.dim = 1;
  deep.dim = 4;
  deep.mode = "concat";
  config.wide = {wide};
  config.deep = {deep, Spec(LayerType::kConcat), Linear(8), Spec(LayerType::kRelu), Linear(1)};
  for (LayerConfig& c : config.deep) c.name.clear();
  auto model = MustBuild(config);
  std::vector<std::string> names;
  for (const Param* p : model->params()) names.push_back(p->name);
  CHECK(names == std::vector<std::string>{"wide_embedding_bag0.weight",
                                          "deep_embedding_bag0.weight", "deep_linear2.weight",
                                          "deep_linear2.bias", "deep_linear4.weight",
                                          "deep_linear4.bias"});
  std::mt19937 rng(5);
  Batch b;
  b.fields = 2;
  b.dense = Tensor({64, 3});
  b.dense.data = Uniform(b.dense.data.size(), &rng);
  for (int s = 0; s < 64; ++s) {
    const int64_t id = rng() % 10;
    b.sparse.insert(b.sparse.end(), {id, static_cast<int64_t>(rng() % 10)});
    b.labels.push_back(id < 5 ? 1.0f : 0.0f);
  }
  CHECK(model->Forward(b, false).shape == Shape{64, 1});
  auto [before, after] = Train(model.get(), b, 100, 0.5f);
  CHECK(after < before / 5);
}

TEST_CASE("Model::Build names the layer and its line in every error") {
  ModelConfig config;
  config.input = {1, 8, 8};
  LayerConfig conv = Spec(LayerType::kConv2d);
  conv.out_channels = 4;
  conv.kernel = 3;
  conv.line = 10;
  LayerConfig conv2 = conv;
  conv2.name = "conv2";
  conv2.line = 12;
  config.layers = {conv, Spec(LayerType::kRelu), Spec(LayerType::kFlatten), conv2, Linear(10)};
  std::string error = BuildError(config);
  CHECK(error.find("layer 3 (conv2) at line 12: conv2d expects input [C, H, W], got [144]") !=
        std::string::npos);

  config.layers = {conv, LayerConfig{}};
  config.layers[1].type = static_cast<LayerType>(42);  // YAML cannot say this; code can
  config.layers[1].line = 11;
  CHECK(BuildError(config) == "layer 1 (unknown1) at line 11: unknown layer type 42");

  LayerConfig missing[4] = {Spec(LayerType::kLinear), Spec(LayerType::kConv2d),
                            Spec(LayerType::kEmbeddingBag), Spec(LayerType::kMaxpool)};
  missing[1].out_channels = 2;  // but no kernel
  missing[2].vocab = 10;        // but no dim
  const char* needs[4] = {"linear needs out > 0", "conv2d needs kernel > 0",
                          "embedding_bag needs dim > 0", "maxpool needs kernel > 0"};
  for (int i = 0; i < 4; ++i) {
    missing[i].line = 30 + i;
    config.layers = {missing[i]};
    error = BuildError(config);
    INFO(error);
    CHECK(error.find(std::string("layer 0 (") + LayerTypeName(missing[i].type) + ") at line " +
                     std::to_string(30 + i) + ": " + needs[i]) != std::string::npos);
  }

  config.input = {5};
  config.layers = {Linear(4, "fc"), Linear(3, "fc")};
  CHECK(BuildError(config) == "layer 1 (fc): duplicate parameter name fc.weight");
  config.layers = {Linear(1, "fc")};
  CHECK(BuildError(config).find("softmax_cross_entropy needs [classes]") != std::string::npos);
  config.wide = {Linear(1, "w")};
  CHECK(BuildError(config).find("not both") != std::string::npos);
}

TEST_CASE("initial weights depend only on the seed and the parameter's name") {
  ModelConfig a;
  a.input = {5};
  a.layers = {Linear(4, "fc_a"), Linear(3, "fc_b")};
  CHECK(Values(*MustBuild(a, 7)) == Values(*MustBuild(a, 7)));
  const auto seed7 = Values(*MustBuild(a, 7)), seed8 = Values(*MustBuild(a, 8));
  CHECK(seed7[0] != seed8[0]);
  CHECK(seed7[2] != seed8[2]);
  // fc_b [3, 4] built second here and first there: the same values.
  ModelConfig b;
  b.input = {4};
  b.layers = {Linear(3, "fc_b"), Linear(2, "fc_c")};
  CHECK(Values(*MustBuild(b, 7))[0] == seed7[2]);
}

TEST_CASE("initializers have the documented spread") {
  struct Expect {
    const char* init;
    double mean_abs;  // E|w| for 200 inputs, 100 outputs, scale 0.05
  };
  const double he_std = std::sqrt(2.0 / 200), bound = std::sqrt(6.0 / 300);
  const double normal_abs = std::sqrt(2.0 / std::acos(-1.0));  // E|z| for a standard normal z
  for (Expect e :
       {Expect{"he", he_std * normal_abs}, Expect{"xavier", bound / 2},
        Expect{"normal", 0.05 * normal_abs}, Expect{"uniform", 0.025}, Expect{"zeros", 0.0}}) {
    LayerConfig c = Linear(100, "fc");
    c.init = e.init;
    c.init_scale = 0.05f;
    auto layer = BuildLayer(Case(c, {200}));
    double sum = 0.0;
    for (float w : layer->Params()[0]->value.data) sum += std::fabs(w);
    INFO(e.init);
    CHECK(sum / 20000 == doctest::Approx(e.mean_abs).epsilon(0.03));
    for (float v : layer->Params()[1]->value.data) CHECK(v == 0.0f);
  }
}

// Not a test: reports LeNet's training throughput on one thread.
TEST_CASE("LeNet training throughput, batch 64" * doctest::skip()) {
  ModelConfig config = testing::LeNet();
  for (LayerConfig& c : config.layers) c.name.clear();
  auto model = MustBuild(config);
  std::mt19937 rng(1);
  Batch batch;
  batch.dense = Tensor({64, 1, 28, 28});
  batch.dense.data = Uniform(batch.dense.data.size(), &rng, 0.0f, 1.0f);
  for (int i = 0; i < 64; ++i) batch.labels.push_back(static_cast<float>(i % 10));
  auto step = [&] {
    model->Forward(batch, true);
    REQUIRE(model->Backward(batch).ok());
    SgdUpdate(model.get(), 0.01f);
  };
  for (int i = 0; i < 20; ++i) step();
  // Rounds of 30 steps: the median is typical; the best is what the code
  // does when nothing else wants the core.
  std::vector<double> rates;
  for (int round = 0; round < 15; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 30; ++i) step();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    rates.push_back(30 * 64 / took.count());
  }
  std::sort(rates.begin(), rates.end());
  MESSAGE("LeNet forward+backward+SGD, one thread: median " << rates[rates.size() / 2]
                                                            << " samples/s, best " << rates.back());
}

// A label the head has no output for (10-class data on a 5-class head) is
// an error naming it, in every build: Release drops asserts, and the loss
// read past the row's logits.

}  // namespace
}  // namespace pstrain
