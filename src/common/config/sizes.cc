#include "src/common/config/sizes.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace pstrain {
namespace {

constexpr uint64_t kSaturated = UINT64_MAX;

// a * b and a + b, stuck at kSaturated instead of wrapping: sizes from a
// config can be anything up to 2^63.
uint64_t Mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > kSaturated / a) return kSaturated;
  return a * b;
}
uint64_t Add(uint64_t a, uint64_t b) { return a > kSaturated - b ? kSaturated : a + b; }

uint64_t Elements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n = Mul(n, static_cast<uint64_t>(std::max<int64_t>(d, 0)));
  return n;
}

std::string Count(uint64_t n) { return n == kSaturated ? "more than 2^64" : std::to_string(n); }

class SizeCheck {
 public:
  explicit SizeCheck(const Config& config) : config_(config), model_(config.model) {}

  Status Run() {
    const uint64_t batch = static_cast<uint64_t>(config_.train.batch_size);
    if (Mul(Elements(model_.input), batch) > kMaxTensorElements)
      return Error(model_.input_line, "model.input",
                   fmt::format("a batch of {} samples of {} is {} elements; at most {} per tensor "
                               "(lower train.batch_size)",
                               batch, ShapeText(model_.input),
                               Count(Mul(Elements(model_.input), batch)), kMaxTensorElements));
    for (const auto& [label, key, list] : {std::make_tuple("", "layers", &model_.layers),
                                           std::make_tuple("wide", "wide", &model_.wide),
                                           std::make_tuple("deep", "deep", &model_.deep)})
      PSTRAIN_RETURN_IF_ERROR(Tower(label, key, *list));
    return Status::OK();
  }

 private:
  Status Error(int line, const std::string& path, const std::string& what) const {
    return InvalidArgument(fmt::format("{}:{}: {}: {}", config_.source, line, path, what));
  }
  static std::string ShapeText(const std::vector<int64_t>& shape) {
    std::string s;
    for (int64_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
    return "[" + s + "]";
  }

  // A parameter of `elements` values that a worker allocates.
  Status Param(const LayerConfig& layer, const std::string& path, const std::string& name,
               uint64_t elements) {
    if (elements > kMaxTensorElements)
      return Error(layer.line, path,
                   fmt::format("makes parameter '{}' of {} elements; at most {} per tensor", name,
                               Count(elements), kMaxTensorElements));
    total_ = Add(total_, elements);
    if (total_ > kMaxModelElements)
      return Error(layer.line, path,
                   fmt::format("the model's parameters reach {} elements with '{}'; at most {} "
                               "(16 GiB of float32) in all",
                               Count(total_), name, kMaxModelElements));
    return Status::OK();
  }

  // Walks one list of layers through the shapes they make (the rules of
  // src/nn's Build); where a shape does not fit, stops: Build says why.
  Status Tower(const char* label, const char* key, const std::vector<LayerConfig>& layers) {
    std::vector<int64_t> shape = model_.input;
    for (size_t i = 0; i < layers.size(); ++i) {
      const LayerConfig& c = layers[i];
      const std::string name = c.name.empty() ? DefaultLayerName(label, c.type, i) : c.name;
      bool fits = true;
      PSTRAIN_RETURN_IF_ERROR(Layer(c, fmt::format("model.{}[{}]", key, i), name, &shape, &fits));
      if (!fits) return Status::OK();
    }
    return Status::OK();
  }

  // One layer `name` at `path`: its parameters, and `shape` becomes its
  // output's. `fits` false: the input does not fit (Build says why).
  Status Layer(const LayerConfig& c, const std::string& path, const std::string& name,
               std::vector<int64_t>* shape_io, bool* fits) {
    std::vector<int64_t>& shape = *shape_io;
    switch (c.type) {
      case LayerType::kLinear:
        PSTRAIN_RETURN_IF_ERROR(
            Param(c, path + ".out", name + ".weight", Mul(Elements(shape), c.out)));
        shape = {c.out};
        break;
      case LayerType::kConv2d:
      case LayerType::kMaxpool:
      case LayerType::kAvgpool: {
        const int64_t k = c.kernel, p = c.padding;
        if (shape.size() != 3 || shape[1] + 2 * p < k || shape[2] + 2 * p < k) {
          *fits = false;
          return Status::OK();
        }
        const bool conv = c.type == LayerType::kConv2d;
        const int64_t s = c.stride > 0 ? c.stride : conv ? 1 : k;
        if (conv)
          PSTRAIN_RETURN_IF_ERROR(Param(c, path + ".out_channels", name + ".weight",
                                        Mul(Mul(c.out_channels, shape[0]), Mul(k, k))));
        shape = {conv ? c.out_channels : shape[0], (shape[1] + 2 * p - k) / s + 1,
                 (shape[2] + 2 * p - k) / s + 1};
        break;
      }
      case LayerType::kLayerNorm:
        PSTRAIN_RETURN_IF_ERROR(Param(c, path, name + ".weight", Elements(shape)));
        PSTRAIN_RETURN_IF_ERROR(Param(c, path, name + ".bias", Elements(shape)));
        break;
      case LayerType::kBatchNorm:  // weight, bias, running mean and variance
        if (!shape.empty())
          PSTRAIN_RETURN_IF_ERROR(
              Param(c, path, name + ".weight", Mul(4, static_cast<uint64_t>(shape[0]))));
        break;
      case LayerType::kResidual: {
        std::vector<int64_t> skip = shape;
        for (size_t j = 0; j < c.layers.size() && *fits; ++j) {
          const LayerConfig& sub = c.layers[j];
          PSTRAIN_RETURN_IF_ERROR(Layer(sub, fmt::format("{}.layers[{}]", path, j),
                                        name + "." + SubLayerName(sub, j), &shape, fits));
        }
        for (const LayerConfig& projection : c.projection)
          PSTRAIN_RETURN_IF_ERROR(
              Layer(projection, path + ".projection", name + ".projection", &skip, fits));
        break;
      }
      case LayerType::kFlatten:
        shape = {static_cast<int64_t>(std::min<uint64_t>(Elements(shape), kSaturated >> 1))};
        break;
      case LayerType::kConcat:
        shape = {static_cast<int64_t>(
            std::min<uint64_t>(Add(Elements(shape), Elements(model_.input)), kSaturated >> 1))};
        break;
      case LayerType::kEmbeddingBag:
        PSTRAIN_RETURN_IF_ERROR(Embedding(c, path, name + ".weight"));
        shape = {c.mode == "concat" ? SlotsRead(c, model_.sparse_fields) * c.dim : c.dim};
        break;
      default:  // activations, dropout: the shape goes through
        break;
    }
    const uint64_t batch = static_cast<uint64_t>(config_.train.batch_size);
    const uint64_t out = Mul(Elements(shape), batch);
    if (out > kMaxTensorElements)
      return Error(c.line, path,
                   fmt::format("its output for a batch of {} samples is {} elements; at most {} "
                               "per tensor (lower train.batch_size or the layer's size)",
                               batch, Count(out), kMaxTensorElements));
    return Status::OK();
  }

  // A table on the servers grows by the rows touched; a worker holds its
  // cache and a batch's rows. Anywhere else the whole table is a parameter.
  Status Embedding(const LayerConfig& c, const std::string& path, const std::string& param) {
    const ParameterRule* rule = FindParameterRule(config_, param);
    if (rule == nullptr || !rule->init_in_server)
      return Param(c, path + ".vocab", param, Mul(c.vocab, c.dim));
    const int64_t batch = std::max<int64_t>(config_.train.batch_size, kMinStagedBatch);
    const int fields = SlotsRead(c, model_.sparse_fields);
    const uint64_t staged = Mul(Mul(batch, fields), c.dim);
    if (staged > kMaxTensorElements)
      return Error(c.line, path + ".dim",
                   fmt::format("a batch's rows of '{}' ({} ids of {} fields, dim {}) are {} "
                               "elements; at most {} per tensor",
                               param, batch, fields, c.dim, Count(staged), kMaxTensorElements));
    const uint64_t cached = Mul(rule->cache_rows, c.dim);
    if (cached > kMaxTensorElements)
      return Error(rule->line,
                   fmt::format("parameters[{}].cache_rows", rule - &config_.parameters[0]),
                   fmt::format("{} rows of dim {} for '{}' are {} elements; at most {} per tensor",
                               rule->cache_rows, c.dim, param, Count(cached), kMaxTensorElements));
    return Status::OK();
  }

  const Config& config_;
  const ModelConfig& model_;
  uint64_t total_ = 0;  // dense parameter elements so far
};

}  // namespace

Status CheckConfigSizes(const Config& config) {
  if (!config.has_model) return Status::OK();
  return SizeCheck(config).Run();
}

}  // namespace pstrain
