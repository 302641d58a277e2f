// Tests for src/nn: every layer's gradients against central finite
// differences, the losses, training that actually lowers the loss, the
// messages of Model::Build, and seeded initialization (the newer layers'
// own cases: tests/nn_layers_test.cc). A LeNet throughput
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
#include "tests/nn_grad_util.h"

namespace pstrain {
namespace {

using nn_testing::BuildLayer;
using nn_testing::Case;
using nn_testing::CheckAgainstDifferences;
using nn_testing::CheckLayerGradients;
using nn_testing::Distinct;
using nn_testing::GradCase;
using nn_testing::kSeed;
using nn_testing::Spec;
using nn_testing::Uniform;

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
  cases.push_back(Case(Spec(LayerType::kBatchNorm), {3}, 4).Eps(5e-3f));
  cases.push_back(Case(Spec(LayerType::kBatchNorm), {2, 3, 2}, 3).Eps(5e-3f));
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
