// The configs shipped in configs/ load, and hold what docs/ says.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "src/common/config/config.h"

namespace pstrain {
namespace {

const std::string kRepo = std::string(PSTRAIN_SOURCE_DIR) + "/";

TEST_CASE("configs/ps_example.yaml is valid") {
  const std::string repo = kRepo;
  auto c = LoadConfig(repo + "configs/ps_example.yaml");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->train.mode == UpdateMode::kSsp);
  CHECK(c->train.checkpoint);
  REQUIRE(c->parameters.size() == 3);
  CHECK(OptimizerFor(*c, "emb_user").type == OptimizerType::kAdagrad);
  CHECK_FALSE(FindParameterRule(*c, "fc1")->ps);
}

TEST_CASE("the compressed LeNet configs compress what docs/ says") {
  const std::string repo = kRepo;
  // Every PS weight threshold-encoded but the biases.
  auto ps = LoadConfig(repo + "configs/lenet_compressed.yaml");
  REQUIRE_MESSAGE(ps.ok(), ps.status().message());
  CHECK(CompressionFor(*ps, "conv1.weight").type == CompressionType::kThreshold);
  CHECK(CompressionFor(*ps, "fc1.weight").shake_up_every == 0);
  CHECK(!CompressionFor(*ps, "fc1.bias").enabled());
  CHECK(FindParameterRule(*ps, "fc1.bias")->ps);
  // The all-reduced fc weights encoded, the convolutions on the servers dense.
  auto hybrid = LoadConfig(repo + "configs/lenet_hybrid_compressed.yaml");
  REQUIRE_MESSAGE(hybrid.ok(), hybrid.status().message());
  CHECK(!FindParameterRule(*hybrid, "fc2.weight")->ps);
  CHECK(CompressionFor(*hybrid, "fc2.weight").type == CompressionType::kThreshold);
  CHECK(CompressionFor(*hybrid, "fc2.weight").max_density == doctest::Approx(1e-2));
  CHECK(!CompressionFor(*hybrid, "conv1.weight").enabled());
}

TEST_CASE("the Fashion-MNIST configs are valid") {
  const std::string repo = kRepo;
  const std::vector<std::string> kData = {
      "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
      "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"};
  for (const char* name : {"lenet_fashion_mnist.yaml", "mlp_fashion_mnist.yaml"}) {
    CAPTURE(name);
    auto c = LoadConfig(repo + "configs/" + name);
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    CHECK(c->model.input == std::vector<int64_t>{1, 28, 28});
    CHECK(c->model.loss == LossType::kSoftmaxCrossEntropy);
    CHECK(c->model.layers.back().name == "fc3");
    CHECK(c->model.layers.back().out == 10);
    CHECK(c->data.format == DataFormat::kIdx);
    CHECK(c->data.train == kData);
    CHECK(c->data.test.size() == 2);
    CHECK(c->train.epochs == 12);
    CHECK(c->train.batch_size == 64);
    CHECK(c->train.mode == UpdateMode::kSync);
    CHECK(c->train.optimizer.type == OptimizerType::kMomentum);
    CHECK(c->train.optimizer.lr == doctest::Approx(0.05));
    CHECK(c->train.optimizer.momentum == doctest::Approx(0.9));
    REQUIRE(FindParameterRule(*c, "fc1.weight") != nullptr);
    CHECK(FindParameterRule(*c, "fc1.weight")->ps);
  }
  auto lenet = LoadConfig(repo + "configs/lenet_fashion_mnist.yaml");
  REQUIRE(lenet.ok());
  REQUIRE(lenet->model.layers.size() == 12);
  CHECK(lenet->model.layers[0].name == "conv1");
  CHECK(lenet->model.layers[0].padding == 2);
  CHECK(lenet->model.layers[3].out_channels == 16);
  CHECK(lenet->model.layers[7].out == 120);
  CHECK(lenet->model.layers[9].out == 84);
  auto mlp = LoadConfig(repo + "configs/mlp_fashion_mnist.yaml");
  REQUIRE(mlp.ok());
  REQUIRE(mlp->model.layers.size() == 6);
  CHECK(mlp->model.layers[0].type == LayerType::kFlatten);
  CHECK(mlp->model.layers[1].out == 256);
  CHECK(mlp->model.layers[3].out == 128);
}

}  // namespace
}  // namespace pstrain
