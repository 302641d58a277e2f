#include "roles/placement/placed_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace pstrain {
namespace {

// Gives each server-held table of `model` room for `max_batch` samples' ids.
void ResizeServerTables(const std::vector<ServerTable>& tables, int max_batch, ModelConfig* model) {
  // NamedLayers gives the names Model::Build will use, in list order.
  const std::vector<LayerConfig> named = NamedLayers(*model);
  size_t k = 0;
  for (std::vector<LayerConfig>* list : {&model->layers, &model->wide, &model->deep}) {
    for (LayerConfig& layer : *list) {
      const std::string param = named[k++].name + ".weight";
      const int64_t rows =
          static_cast<int64_t>(max_batch) * std::max(1, SlotsRead(layer, model->sparse_fields));
      for (const ServerTable& t : tables)
        if (t.options.name == param) layer.vocab = rows;
    }
  }
}

}  // namespace

std::vector<Param*> PlacedModel::ParamsAt(ParamPlace place) const {
  std::vector<Param*> out;
  for (const PlacedParam& p : params)
    if (p.place == place) out.push_back(p.param);
  return out;
}

Param* PlacedModel::TableParam(size_t t) const {
  for (const PlacedParam& p : params)
    if (p.place == ParamPlace::kServerTable && p.table == static_cast<int>(t)) return p.param;
  return nullptr;
}

StatusOr<PlacedModel> PlaceModel(const Config& config, int max_batch) {
  auto tables = ServerTables(config);
  if (!tables.ok()) return tables.status();
  PlacedModel placed;
  placed.tables = std::move(*tables);
  placed.model_config = config.model;
  ResizeServerTables(placed.tables, max_batch, &placed.model_config);
  auto model = Model::Build(placed.model_config, config.train.seed);
  if (!model.ok()) return model.status().WithContext(config.source);
  placed.model = std::move(*model);
  for (Param* p : placed.model->params()) {
    PlacedParam& placed_param = placed.params.emplace_back();
    placed_param.param = p;
    for (size_t t = 0; t < placed.tables.size(); ++t) {
      if (placed.tables[t].options.name != p->name) continue;
      placed_param.place = ParamPlace::kServerTable;
      placed_param.table = static_cast<int>(t);
    }
    if (placed_param.place == ParamPlace::kServerTable) continue;
    const ParameterRule* rule = FindParameterRule(config, p->name);
    // A statistic a layer keeps (batch_norm's) stays with the workers.
    if ((rule != nullptr && !rule->ps) || !p->trainable)
      placed_param.place = ParamPlace::kAllReduced;
  }
  for (size_t t = 0; t < placed.tables.size(); ++t)
    if (placed.TableParam(t) == nullptr)
      return Internal(
          fmt::format("the model has no parameter '{}'", placed.tables[t].options.name));
  return placed;
}

}  // namespace pstrain
