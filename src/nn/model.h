// Model: the network a config describes (a sequential list of layers, or
// wide + deep towers summed into one logit), with its loss.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "src/common/config/model_config.h"
#include "src/nn/layer.h"

namespace pstrain {

// Every layer of `config` (the sequential list, or wide then deep), with the
// default name filled in where none was given, as Model::Build names them.
std::vector<LayerConfig> NamedLayers(const ModelConfig& config);

// One layer as built: what `pstrain check` shows of it.
struct LayerOutput {
  std::string tower;  // "", "wide" or "deep"
  std::string name;
  LayerType type = LayerType::kLinear;
  Shape shape;  // one sample's output
};

class Model {
 public:
  // Builds and initializes every layer (seeded: the same seed gives the same
  // weights on every worker). An error names the layer (and its config line)
  // and what does not fit, e.g. a shape mismatch.
  static StatusOr<std::unique_ptr<Model>> Build(const ModelConfig& config, uint64_t seed);
  ~Model();

  // Every parameter, in a fixed order (this is the list of PS tensors).
  const std::vector<Param*>& params() const;
  // Every layer in build order (the sequential list, or wide then deep).
  const std::vector<LayerOutput>& layers() const;
  // One sample's logits: [classes] for softmax_cross_entropy, [1] else.
  const Shape& output_shape() const;

  // Logits of the batch: [N, classes] for softmax_cross_entropy, [N, 1] for
  // bce_with_logits.
  const Tensor& Forward(const Batch& batch, bool training);
  // After Forward(batch, true): the mean loss over the batch, and every
  // parameter's grad set to the gradient of that mean loss. A label that
  // does not fit the loss is an error (nothing is updated).
  StatusOr<float> Backward(const Batch& batch);
  // The mean loss of `logits` against the batch's labels (no gradients).
  StatusOr<float> Loss(const Tensor& logits, const Batch& batch) const;
  // The model's only random state: the training Forwards so far, which key
  // the dropout masks (Layer::SetTrainingForwards). For a resumed run.
  void SetTrainingForwards(uint64_t done);

 private:
  struct Impl;  // layers, their activations and gradients (model.cc)
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pstrain
