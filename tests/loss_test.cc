// Losses against labels the model cannot hold: an error naming the sample,
// never a read out of bounds (src/nn/loss.h), alone and through a model.
#include "src/nn/loss.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "src/nn/model.h"

namespace pstrain {
namespace {

TEST_CASE("loss: a label outside the head's outputs is an error, not a read out of bounds") {
  Tensor logits({3, 5});
  logits.data.assign(15, 0.5f);
  Tensor grad;
  for (float bad : {5.0f, 9.0f, -1.0f, 2.5f}) {
    CAPTURE(bad);
    const StatusOr<float> loss =
        MeanLoss(LossType::kSoftmaxCrossEntropy, logits, {0, bad, 4}, &grad);
    REQUIRE_FALSE(loss.ok());
    CHECK(loss.status().message().find("of sample 1") != std::string::npos);
    CHECK(loss.status().message().find("needs labels 0..4") != std::string::npos);
  }
  CHECK(MeanLoss(LossType::kSoftmaxCrossEntropy, logits, {0, 4, 4}, &grad).ok());
  Tensor one({2, 1});
  one.data = {0.0f, 0.0f};
  CHECK_FALSE(MeanLoss(LossType::kBceWithLogits, one, {1, 2}, nullptr).ok());
  CHECK_FALSE(MeanLoss(LossType::kBceWithLogits, one, {1}, nullptr).ok());  // rows != labels
  CHECK_FALSE(MeanLoss(LossType::kBceWithLogits, logits, {1, 0, 1}, nullptr).ok());  // 5 logits

  // Through a built model: Backward fails and leaves the weights as they were.
  ModelConfig config;
  config.input = {4};
  LayerConfig head;
  head.type = LayerType::kLinear;
  head.name = "head";
  head.out = 5;
  config.layers = {head};
  auto model = Model::Build(config, 1);
  REQUIRE(model.ok());
  CHECK((*model)->output_shape() == Shape{5});
  Batch batch;
  batch.dense = Tensor({2, 4});
  batch.dense.data.assign(8, 1.0f);
  batch.labels = {1, 7};
  (*model)->Forward(batch, true);
  const StatusOr<float> loss = (*model)->Backward(batch);
  REQUIRE_FALSE(loss.ok());
  CHECK(loss.status().message().find("label 7 of sample 1") != std::string::npos);
}

}  // namespace
}  // namespace pstrain
