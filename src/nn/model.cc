// Model: builds the layers a ModelConfig lists, checking that each one's
// output fits the next one's input, and runs them in order.
#include "src/nn/model.h"

#include <fmt/format.h>

#include <cassert>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "src/nn/eigen_maps.h"
#include "src/nn/layers.h"
#include "src/nn/loss.h"

namespace pstrain {
namespace {

// A sequential list of layers and the tensors between them, kept across
// steps so that, once batch shapes are stable, nothing is allocated.
struct Tower {
  std::string label;  // "wide", "deep", or "" for a sequential model
  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<LayerConfig> configs;  // with default names filled in
  std::vector<Tensor> outs;          // outs[i]: layer i's output of the last Forward
  std::vector<Tensor> douts;         // douts[i]: dL/d outs[i] (the last: unused, see dlogits)
};

// "layer 3 (conv2) at line 12"; in a tower, "deep layer 1 (deep_linear1)".
std::string Where(const Tower& tower, size_t index) {
  const LayerConfig& c = tower.configs[index];
  std::string s = tower.label.empty() ? "layer " : tower.label + " layer ";
  s += std::to_string(index) + " (" + c.name + ")";
  if (c.line > 0) s += " at line " + std::to_string(c.line);
  return s;
}

// The shape layer `index` of `tower` reads: the model's dense input, or the
// sparse ids for an embedding_bag (which therefore must come first).
StatusOr<Shape> InputShape(const ModelConfig& config, const Tower& tower, size_t index,
                           const Shape& previous) {
  const bool ids = tower.configs[index].type == LayerType::kEmbeddingBag;
  if (ids && index != 0) {
    return InvalidArgument(Where(tower, index) +
                           ": embedding_bag reads the sparse ids, so it must come first");
  }
  if (ids && config.sparse_fields <= 0) {
    return InvalidArgument(Where(tower, index) + ": embedding_bag needs model sparse_fields > 0");
  }
  if (ids) return Shape{config.sparse_fields};
  if (index == 0 && config.input.empty()) {
    return InvalidArgument(Where(tower, index) + ": the model has no dense input");
  }
  return previous;
}

Status BuildTower(const ModelConfig& config, const std::vector<LayerConfig>& configs, uint64_t seed,
                  Tower* tower, std::vector<Param*>* params, std::set<std::string>* names,
                  std::vector<LayerOutput>* outputs, Shape* shape) {
  const LayerContext context{config.input};
  *shape = config.input;
  for (size_t i = 0; i < configs.size(); ++i) {
    LayerConfig c = configs[i];
    if (c.name.empty()) c.name = DefaultLayerName(tower->label, c.type, i);
    tower->configs.push_back(c);
    auto layer = CreateLayer(c, context);
    if (!layer.ok()) return layer.status().WithContext(Where(*tower, i));
    auto input = InputShape(config, *tower, i, *shape);
    if (!input.ok()) return input.status();
    StatusOr<Shape> output = Internal("not built");
    try {
      output = (*layer)->Build(*input, seed);
    } catch (const std::bad_alloc& e) {
      output = InvalidArgument(fmt::format("not enough memory for its parameters: {}", e.what()));
    }
    if (!output.ok()) return output.status().WithContext(Where(*tower, i));
    *shape = *output;
    outputs->push_back({tower->label, c.name, c.type, *shape});
    for (Param* p : (*layer)->Params()) {
      if (!names->insert(p->name).second) {
        return InvalidArgument(Where(*tower, i) + ": duplicate parameter name " + p->name);
      }
      params->push_back(p);
    }
    tower->layers.push_back(std::move(*layer));
  }
  tower->outs.resize(configs.size());
  tower->douts.resize(configs.size());
  return Status::OK();
}

// What the loss needs of one sample's logits.
Status CheckOutput(LossType loss, const Tower& tower, const Shape& shape) {
  const std::string got = Where(tower, tower.layers.size() - 1) + ": the model's output is " +
                          ShapeString(shape) + ", but ";
  if (!tower.label.empty() && shape != Shape{1}) {
    return InvalidArgument(got + "a tower must end in [1] (one logit)");
  }
  if (loss != LossType::kSoftmaxCrossEntropy && shape != Shape{1}) {
    return InvalidArgument(got + LossTypeName(loss) + " needs [1]");
  }
  if (loss == LossType::kSoftmaxCrossEntropy && (shape.size() != 1 || shape[0] < 2)) {
    return InvalidArgument(got + "softmax_cross_entropy needs [classes], at least 2 classes");
  }
  return Status::OK();
}

}  // namespace

struct Model::Impl {
  LossType loss = LossType::kSoftmaxCrossEntropy;
  std::vector<Tower> towers;  // one, or wide then deep
  std::vector<Param*> params;
  std::vector<LayerOutput> outputs;
  Shape output_shape;
  Tensor sum;                      // two towers: their outputs added
  Tensor dlogits;                  // d(mean loss)/d(logits)
  const Tensor* logits = nullptr;  // what the last Forward returned
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

StatusOr<std::unique_ptr<Model>> Model::Build(const ModelConfig& config, uint64_t seed) {
  const bool towers = !config.wide.empty() || !config.deep.empty();
  if (towers == !config.layers.empty()) {
    return InvalidArgument(towers ? "model: give layers, or wide and deep towers, not both"
                                  : "model: no layers");
  }
  for (int64_t d : config.input) {
    if (d <= 0) return InvalidArgument("model: input " + ShapeString(config.input) + " is empty");
  }
  auto impl = std::make_unique<Impl>();
  impl->loss = config.loss;
  std::set<std::string> names;
  const std::pair<const char*, const std::vector<LayerConfig>*> lists[] = {
      {"", &config.layers}, {"wide", &config.wide}, {"deep", &config.deep}};
  // The config's sizes were checked against caps (config_sizes.h); a machine
  // that still cannot hold the model gets an error, not an abort.
  try {
    for (const auto& [label, configs] : lists) {
      if (configs->empty()) continue;
      Tower& tower = impl->towers.emplace_back();
      tower.label = label;
      Shape shape;
      PSTRAIN_RETURN_IF_ERROR(BuildTower(config, *configs, seed, &tower, &impl->params, &names,
                                         &impl->outputs, &shape));
      PSTRAIN_RETURN_IF_ERROR(CheckOutput(impl->loss, tower, shape));
      impl->output_shape = shape;  // the towers' agree: [1] each
    }
  } catch (const std::bad_alloc& e) {
    return InvalidArgument(
        fmt::format("not enough memory to build the model ({} parameters built): {}",
                    impl->params.size(), e.what()));
  } catch (const std::length_error& e) {
    return InvalidArgument(fmt::format("the model is too large to build: {}", e.what()));
  }
  return std::unique_ptr<Model>(new Model(std::move(impl)));
}

const std::vector<Param*>& Model::params() const { return impl_->params; }
const std::vector<LayerOutput>& Model::layers() const { return impl_->outputs; }
const Shape& Model::output_shape() const { return impl_->output_shape; }

void Model::SetTrainingForwards(uint64_t done) {
  for (Tower& t : impl_->towers)
    for (auto& layer : t.layers) layer->SetTrainingForwards(done);
}

const Tensor& Model::Forward(const Batch& batch, bool training) {
  for (Tower& t : impl_->towers) {
    for (size_t i = 0; i < t.layers.size(); ++i) {
      t.layers[i]->Forward(batch, i == 0 ? batch.dense : t.outs[i - 1], &t.outs[i], training);
    }
  }
  if (impl_->towers.size() == 1) {
    impl_->logits = &impl_->towers[0].outs.back();
    return *impl_->logits;
  }
  const Tensor& wide = impl_->towers[0].outs.back();
  const Tensor& deep = impl_->towers[1].outs.back();
  impl_->sum.Resize(wide.shape);
  ArrayMap(impl_->sum.ptr(), wide.size()) =
      ConstArrayMap(wide.ptr(), wide.size()) + ConstArrayMap(deep.ptr(), deep.size());
  impl_->logits = &impl_->sum;
  return impl_->sum;
}

StatusOr<float> Model::Backward(const Batch& batch) {
  assert(impl_->logits != nullptr && "Backward needs a Forward first");
  const StatusOr<float> loss = MeanLoss(impl_->loss, *impl_->logits, batch.labels, &impl_->dlogits);
  if (!loss.ok()) return loss;
  // A sum passes its gradient unchanged to both towers.
  for (Tower& t : impl_->towers) {
    for (size_t i = t.layers.size(); i-- > 0;) {
      const Tensor& dout = i + 1 == t.layers.size() ? impl_->dlogits : t.douts[i];
      Tensor* din = i == 0 ? nullptr : &t.douts[i - 1];
      t.layers[i]->Backward(batch, i == 0 ? batch.dense : t.outs[i - 1], t.outs[i], dout, din);
    }
  }
  return loss;
}

StatusOr<float> Model::Loss(const Tensor& logits, const Batch& batch) const {
  return MeanLoss(impl_->loss, logits, batch.labels, nullptr);
}

std::vector<LayerConfig> NamedLayers(const ModelConfig& config) {
  std::vector<LayerConfig> out;
  const std::pair<const char*, const std::vector<LayerConfig>*> lists[] = {
      {"", &config.layers}, {"wide", &config.wide}, {"deep", &config.deep}};
  for (const auto& [label, configs] : lists)
    for (size_t i = 0; i < configs->size(); ++i) {
      LayerConfig c = (*configs)[i];
      if (c.name.empty()) c.name = DefaultLayerName(label, c.type, i);
      out.push_back(std::move(c));
    }
  return out;
}

}  // namespace pstrain
