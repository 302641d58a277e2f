// Reading the `model:` section of the config. What each field
// means, and its default, is in model_config.h; this file checks that the
// values are in range and fit together, so src/nn and src/data can trust them.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "src/common/config/config.h"
#include "src/common/config/reader.h"
#include "src/common/config/sizes.h"

namespace pstrain {
namespace config_internal {
namespace {

// The keys a layer type takes besides `type` and `name`.
struct LayerKind {
  LayerType type;
  std::vector<const char*> required;
  std::vector<const char*> optional;
};

const std::vector<LayerKind>& LayerKinds() {
  using T = LayerType;
  static const auto* kinds = new std::vector<LayerKind>{
      {T::kLinear, {"out"}, {"bias", "init", "init_scale"}},
      {T::kConv2d, {"out_channels", "kernel"}, {"stride", "padding", "bias", "init", "init_scale"}},
      {T::kMaxpool, {"kernel"}, {"stride", "padding"}},
      {T::kAvgpool, {"kernel"}, {"stride", "padding"}},
      {T::kRelu, {}, {}},
      {T::kSigmoid, {}, {}},
      {T::kTanh, {}, {}},
      {T::kDropout, {}, {"rate"}},
      {T::kFlatten, {}, {}},
      {T::kConcat, {}, {}},
      {T::kEmbeddingBag, {"vocab", "dim"}, {"mode", "init", "init_scale"}},
      {T::kGelu, {}, {}},
      {T::kLayerNorm, {}, {"eps"}},
      {T::kResidual, {"layers"}, {"projection"}},
      {T::kAugment, {}, {"flip", "crop"}},
      {T::kBatchNorm, {}, {"eps", "momentum", "sync_stats"}},
  };
  return *kinds;
}

// "a maxpool", "an embedding_bag": the type in a message.
std::string WithArticle(LayerType type) {
  const std::string name = LayerTypeName(type);
  bool vowel = std::string("aeiou").find(name[0]) != std::string::npos;
  return (vowel ? "an " : "a ") + name;
}

bool Contains(const std::vector<const char*>& keys, const std::string& key) {
  for (const char* k : keys) {
    if (key == k) return true;
  }
  return false;
}

Status ReadLayer(const Value& v, LayerConfig* layer);
Status ReadLayers(const Value& v, std::vector<LayerConfig>* layers);

Field LayerTypeField(LayerConfig* layer) {
  std::vector<std::pair<const char*, LayerType>> types;
  for (const LayerKind& kind : LayerKinds())
    types.emplace_back(LayerTypeName(kind.type), kind.type);
  return Required(Enum("type", &layer->type, std::move(types)));
}

// Every key a layer may hold; which of them a type takes is LayerKinds'.
std::vector<Field> LayerFields(LayerConfig* layer) {
  return {LayerTypeField(layer),
          NonEmptyString("name", &layer->name),
          Int("out", &layer->out, 1),
          Int("out_channels", &layer->out_channels, 1),
          Int("kernel", &layer->kernel, 1),
          Int("stride", &layer->stride, 0),
          Int("padding", &layer->padding, 0),
          Bool("bias", &layer->bias),
          Float("rate", &layer->rate, Bound::kUnitInterval),
          Int("vocab", &layer->vocab, 1, kMaxEmbeddingVocab),
          Int("dim", &layer->dim, 1, kMaxEmbeddingDim),
          Choice("mode", &layer->mode, {"sum", "mean", "concat"}),
          Choice("init", &layer->init, {"xavier", "he", "normal", "uniform", "zeros"}),
          Float("init_scale", &layer->init_scale, Bound::kPositive),
          Float("eps", &layer->eps, Bound::kPositive),
          Float("momentum", &layer->momentum, Bound::kUnitInterval),
          Bool("sync_stats", &layer->sync_stats),
          {"layers", [layer](const Value& v) { return ReadLayers(v, &layer->layers); }},
          Choice("flip", &layer->flip, {"none", "horizontal"}),
          {"crop",
           [layer](const Value& v) {
             return ReadMap(v, {Required(Int("pad", &layer->crop_pad, 1, kMaxCropPad))});
           }},
          {"projection", [layer](const Value& v) {
             LayerConfig& projection = layer->projection.emplace_back();
             projection.line = v.line;
             return ReadLayer(v, &projection);
           }}};
}

// A layer a residual block may not hold, and why; empty: any.
std::string RefusedInBlock(LayerType type) {
  if (type == LayerType::kEmbeddingBag || type == LayerType::kConcat)
    return fmt::format(
        "{} reads the batch's own input, not the block's: not inside a residual "
        "block",
        LayerTypeName(type));
  return "";
}

// Nesting of residual blocks being read, and the layers read so far of
// this model, on this thread: a hostile config can recurse the reader no
// deeper than kMaxBlockDepth, nor make it read more than kMaxModelLayers.
thread_local int block_depth = 0;
thread_local int64_t layers_read = 0;

Status ReadLayer(const Value& v, LayerConfig* layer) {
  if (block_depth > kMaxBlockDepth)
    return v.Error(fmt::format("residual blocks nest at most {} deep", kMaxBlockDepth));
  if (++layers_read > kMaxModelLayers)
    return v.Error(fmt::format("a model has at most {} layers, blocks' included", kMaxModelLayers));
  struct Nested {
    Nested() { ++block_depth; }
    ~Nested() { --block_depth; }
  } nested;
  std::map<std::string, int> lines;
  if (v.node.IsScalar()) {
    // `- relu` is short for `- {type: relu}`.
    PSTRAIN_RETURN_IF_ERROR(LayerTypeField(layer).read(v));
  } else {
    if (!v.node.IsMap()) return v.Expected("a layer (a mapping, or a type name)");
    PSTRAIN_RETURN_IF_ERROR(ReadMap(v, LayerFields(layer), &lines));
  }
  const LayerKind* kind = nullptr;
  for (const LayerKind& k : LayerKinds()) {
    if (layer->type == k.type) kind = &k;
  }
  // A setting the type ignores (a pooling `out`) is a mistake the user would
  // not notice. Keys are checked in the order they were written.
  for (const auto& entry : v.node.IsMap() ? v.node : YAML::Node()) {
    const std::string& key = entry.first.Scalar();
    if (key == "type" || key == "name" || Contains(kind->required, key) ||
        Contains(kind->optional, key)) {
      continue;
    }
    return v.Key(key, lines[key])
        .Error(fmt::format("not a key of {} layer", WithArticle(kind->type)));
  }
  for (const char* key : kind->required) {
    if (lines.count(key) == 0) {
      return v.Key(key, v.line)
          .Error(fmt::format("required key of {} layer is missing", WithArticle(kind->type)));
    }
  }
  if (layer->projection.size() > 1)  // a mapping has one such key; a guard
    return v.Key("projection", lines["projection"]).Error("at most one projection");
  for (size_t i = 0; i < layer->layers.size() + layer->projection.size(); ++i) {
    const bool body = i < layer->layers.size();
    const LayerConfig& sub = body ? layer->layers[i] : layer->projection[0];
    const std::string refused = RefusedInBlock(sub.type);
    if (refused.empty()) continue;
    const std::string at = body ? fmt::format("layers[{}]", i) : "projection";
    return Value{v.source, v.node, v.path + "." + at, sub.line}.Error(refused);
  }
  return Status::OK();
}

Status ReadLayers(const Value& v, std::vector<LayerConfig>* layers) {
  return ReadNonEmptyList(v, "a non-empty list of layers", [&](const Value& item) {
    LayerConfig& layer = layers->emplace_back();
    layer.line = item.line;
    return ReadLayer(item, &layer);
  });
}

Status ReadShape(const Value& v, std::vector<int64_t>* shape) {
  return ReadNonEmptyList(v, "a non-empty list of integers >= 1", [&](const Value& item) {
    return Int("", &shape->emplace_back(), 1).read(item);
  });
}

// Checks across the keys of `model:` (`lines` from its ReadMap).
Status CheckModel(const Value& v, const std::map<std::string, int>& lines, const ModelConfig& m) {
  bool towers = lines.count("wide") > 0 || lines.count("deep") > 0;
  if (lines.count("layers") > 0 && towers) {
    const char* tower = lines.count("wide") > 0 ? "wide" : "deep";
    return v.Key(tower, lines.at(tower))
        .Error(fmt::format("cannot be combined with {}.layers (line {}): a model is either a "
                           "list of layers or wide/deep towers",
                           v.path, lines.at("layers")));
  }
  if (lines.count("layers") == 0 && !towers) {
    return v.Key("layers", v.line).Error("required key is missing (or give wide/deep towers)");
  }
  std::map<std::string, std::string> names;  // explicit name -> where it was first given
  for (const auto& [key, list] :
       {std::make_pair("layers", &m.layers), std::make_pair("wide", &m.wide),
        std::make_pair("deep", &m.deep)}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const LayerConfig& layer = (*list)[i];
      Value at{v.source, v.node, fmt::format("{}.{}[{}]", v.path, key, i), layer.line};
      // The first layer of a list reads the dense features unless it reads
      // the ids; concat appends them.
      bool reads_dense =
          (i == 0 && layer.type != LayerType::kEmbeddingBag) || layer.type == LayerType::kConcat;
      if (reads_dense && m.input.empty()) {
        return v.Key("input", v.line)
            .Error(fmt::format("required key is missing: {} ({} layer) reads the dense input",
                               at.path, WithArticle(layer.type)));
      }
      if (layer.type == LayerType::kEmbeddingBag && m.sparse_fields == 0) {
        return at.Error(fmt::format(
            "an embedding_bag layer reads the sample's ids; set {}.sparse_fields >= 1", v.path));
      }
      if (layer.name.empty()) continue;
      std::string where = fmt::format("{} (line {})", at.path, layer.line);
      auto [first, inserted] = names.emplace(layer.name, where);
      if (!inserted) {
        return at.Key("name", layer.line)
            .Error(fmt::format("'{}' is already the name of {}; parameter names must be unique",
                               layer.name, first->second));
      }
    }
  }
  return Status::OK();
}

std::vector<Field> ModelFields(ModelConfig* model) {
  const SectionFields layer_keys = &KeysOf<LayerConfig, &LayerFields>;
  return {{"input", [model](const Value& x) { return ReadShape(x, &model->input); }},
          Int("sparse_fields", &model->sparse_fields, 0),
          Enum("device", &model->device, {Device::kCpu, Device::kGpu}, &DeviceName),
          Enum("loss", &model->loss,
               {LossType::kSoftmaxCrossEntropy, LossType::kBceWithLogits, LossType::kMse},
               &LossTypeName),
          Section("layers", &model->layers, &ReadLayers, layer_keys, /*list=*/true),
          Section("wide", &model->wide, &ReadLayers, layer_keys, /*list=*/true),
          Section("deep", &model->deep, &ReadLayers, layer_keys, /*list=*/true)};
}

}  // namespace

std::vector<Field> ModelFieldKeys() { return KeysOf<ModelConfig, &ModelFields>(); }

Status ReadModel(const Value& v, ModelConfig* model) {
  *model = ModelConfig{};
  layers_read = 0;
  model->line = v.line;
  std::map<std::string, int> lines;
  PSTRAIN_RETURN_IF_ERROR(ReadMap(v, ModelFields(model), &lines));
  model->input_line = lines.count("input") > 0 ? lines["input"] : v.line;
  return CheckModel(v, lines, *model);
}

}  // namespace config_internal

std::vector<LayerKeys> KnownLayerKeys() {
  std::vector<LayerKeys> out;
  for (const config_internal::LayerKind& kind : config_internal::LayerKinds()) {
    LayerKeys& keys = out.emplace_back();
    keys.type = LayerTypeName(kind.type);
    keys.required.assign(kind.required.begin(), kind.required.end());
    keys.optional.assign(kind.optional.begin(), kind.optional.end());
  }
  return out;
}

}  // namespace pstrain
