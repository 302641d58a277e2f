// Binding data.columns' `table:` names to the model's embedding_bag layers:
// each named layer reads the id slots of the columns that name it, and a
// column's ids hash into its tables' vocab (docs/configuration.md, "Which
// table reads which column").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <string>
#include <vector>

#include "src/common/config/config.h"
#include "src/common/config/reader.h"

namespace pstrain {
namespace config_internal {
namespace {

// The model's embedding_bag layers by the name Model::Build gives them
// ("deep_embedding_bag0" when unnamed). One reads the sample's ids, so it
// comes first in its list (Model::Build refuses it elsewhere); refused here
// already, as binding columns to many of them would take memory for each.
Status EmbeddingLayers(const Value& doc, ModelConfig* model,
                       std::map<std::string, LayerConfig*>* out) {
  const std::pair<const char*, std::vector<LayerConfig>*> lists[] = {
      {"", &model->layers}, {"wide", &model->wide}, {"deep", &model->deep}};
  for (const auto& [tower, layers] : lists)
    for (size_t i = 0; i < layers->size(); ++i) {
      LayerConfig& layer = (*layers)[i];
      if (layer.type != LayerType::kEmbeddingBag) continue;
      const std::string list = *tower == '\0' ? "layers" : tower;
      if (i > 0)
        return Value{doc.source, doc.node, fmt::format("model.{}[{}]", list, i), layer.line}.Error(
            "embedding_bag reads the sample's ids, so it must come first in its list");
      (*out)[layer.name.empty() ? DefaultLayerName(tower, layer.type, i) : layer.name] = &layer;
    }
  return Status::OK();
}

std::string Quoted(const std::map<std::string, LayerConfig*>& layers) {
  std::vector<std::string> names;
  for (const auto& entry : layers) names.push_back("'" + entry.first + "'");
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

Status BindColumnTables(const Value& doc, Config* config) {
  std::vector<ColumnConfig>& columns = config->data.columns;
  bool named = false;
  for (const ColumnConfig& c : columns) named = named || !c.tables.empty();
  if (!named) return Status::OK();
  const Value at{doc.source, doc.node["data"], "data.columns",
                 KeyLine(doc.node["data"], "columns")};
  auto column = [&](size_t i) {
    return Value{at.source, at.node, fmt::format("data.columns[{}]", i), columns[i].line};
  };
  if (!config->has_model)
    return at.Error("a column names a table (table:), but there is no model: section");
  if (config->model.device == Device::kGpu)
    return at.Error(
        "columns that name their tables (table:) are not read on the GPU yet; use device: cpu or "
        "leave out table:");
  std::map<std::string, LayerConfig*> layers;
  PSTRAIN_RETURN_IF_ERROR(EmbeddingLayers(doc, &config->model, &layers));
  int slot = 0;
  for (size_t i = 0; i < columns.size(); ++i) {
    ColumnConfig& c = columns[i];
    const int slots = IdSlots(c);
    if (slots == 0) continue;
    if (c.tables.empty())
      return column(i).Error(
          "names no table, while other columns do (table:): name the embedding_bag layers that "
          "read each id column");
    const std::string* first = nullptr;
    for (const std::string& name : c.tables) {
      auto found = layers.find(name);
      if (found == layers.end())
        return column(i)
            .Key("table", c.line)
            .Error(fmt::format("'{}' is not an embedding_bag layer of the model (those are {})",
                               name, Quoted(layers)));
      LayerConfig& layer = *found->second;
      for (int k = 0; k < slots; ++k) {
        if (!layer.slots.empty() && layer.slots.back() >= slot + k)
          return column(i).Key("table", c.line).Error(fmt::format("names '{}' twice", name));
        layer.slots.push_back(slot + k);
      }
      // One id per slot, shared by the tables that read it: they must have
      // as many rows.
      if (first != nullptr && layers[*first]->vocab != layer.vocab)
        return column(i)
            .Key("table", c.line)
            .Error(fmt::format("'{}' has vocab {} and '{}' vocab {}: the tables a column's ids go "
                               "to need the same "
                               "vocab",
                               *first, layers[*first]->vocab, name, layer.vocab));
      first = &name;
      c.vocab = layer.vocab;
    }
    slot += slots;
  }
  for (const auto& [name, layer] : layers)
    if (layer->slots.empty())
      return at.Error(fmt::format(
          "no column names embedding_bag '{}' in table:, so it would read nothing; name it in "
          "the columns it reads",
          name));
  return Status::OK();
}

}  // namespace config_internal
}  // namespace pstrain
