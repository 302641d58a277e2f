#include "roles/placement/server_tables.h"

#include <fmt/format.h>

#include "embedding/tiered_table.h"
#include "roles/placement/id_groups.h"
#include "src/common/random.h"
#include "src/nn/model.h"

namespace pstrain {
namespace {

// The name of the data column that gives a sample's id slot `slot`.
std::string ColumnOfSlot(const DataConfig& data, int slot) {
  int first = 0;
  for (const ColumnConfig& c : data.columns) {
    if (slot < first + IdSlots(c)) return c.name;
    first += IdSlots(c);
  }
  return std::to_string(slot);
}

}  // namespace

StatusOr<std::vector<ServerTable>> ServerTables(const Config& config) {
  std::vector<ServerTable> tables;
  if (!config.has_model) return tables;
  int worker_held = 0;
  for (const LayerConfig& layer : NamedLayers(config.model)) {
    for (const char* suffix : {".weight", ".bias"}) {
      const std::string param = layer.name + suffix;
      const ParameterRule* rule = FindParameterRule(config, param);
      const bool on_servers = rule != nullptr && rule->init_in_server;
      const bool table = layer.type == LayerType::kEmbeddingBag && std::string(suffix) == ".weight";
      if (on_servers && !table)
        return InvalidArgument(
            fmt::format("{}:{}: parameters: '{}' matches {} with init_in_server: true, but only an "
                        "embedding_bag's weight can be a server-held table",
                        config.source, rule->line, param, rule->match));
      if (rule != nullptr && !on_servers &&
          (rule->cache_rows > 0 || rule->admit_after > 0 || rule->evict_after_steps > 0 ||
           rule->max_rows > 0))
        return InvalidArgument(fmt::format(
            "{}:{}: parameters: '{}' matches {}, whose cache and row settings apply only to "
            "server-held tables: add init_in_server: true",
            config.source, rule->line, param, rule->match));
      if (!table) continue;
      if (!on_servers) {
        ++worker_held;
        continue;
      }
      ServerTable t;
      EmbeddingTableOptions& o = t.options;
      o.name = param;
      o.dim = static_cast<int>(layer.dim);
      o.vocab = layer.vocab;
      o.seed = StreamKey(config.train.seed, param);
      auto init = ParseEmbeddingInit(layer.init.empty() ? "normal" : layer.init);
      if (!init.ok())
        return init.status().WithContext(fmt::format("{}:{}: layer {} (a server-held table)",
                                                     config.source, layer.line, layer.name));
      o.init = *init;
      o.init_scale = layer.init_scale;
      o.optimizer = OptimizerFor(config, param);
      o.admit_after = rule->admit_after;
      o.evict_after_steps = rule->evict_after_steps;
      o.max_rows = rule->max_rows;
      PSTRAIN_RETURN_IF_ERROR(o.Validate().WithContext(config.source));
      t.slots = layer.slots;
      t.cache_rows = rule->cache_rows;
      t.cache_staleness = rule->cache_staleness;
      t.memory_rows = rule->server_cache_bytes > 0
                          ? TieredTable::RowsForBytes(o, rule->server_cache_bytes)
                          : rule->server_cache_rows;
      tables.push_back(std::move(t));
    }
  }
  if (!tables.empty() && worker_held > 0)
    return InvalidArgument(fmt::format(
        "{}: {} embedding_bag layers are held by the servers (init_in_server: true) and {} are "
        "not: put every embedding table on the servers, or none",
        config.source, tables.size(), worker_held));
  // A worker numbers a batch's ids once per set of columns that server-held
  // tables read (id_groups.h).
  if (auto c = IdGroups::ConflictIn(tables, config.model.sparse_fields))
    return InvalidArgument(fmt::format(
        "{}: data.columns: column '{}' is read by the server-held tables '{}' and '{}', which "
        "read different columns otherwise (table:): a worker numbers a batch's ids once per "
        "set of columns, so tables on the servers read the same columns or none in common",
        config.source, ColumnOfSlot(config.data, c->slot), tables[c->a].options.name,
        tables[c->b].options.name));
  return tables;
}

std::string ServerStoreDir(const Config& config, int rank) {
  const std::string base =
      config.train.store_dir.empty() ? "pstrain-store" : config.train.store_dir;
  return fmt::format("{}/server-{}", base, rank);
}

bool HasMemoryBudget(const std::vector<ServerTable>& tables) {
  for (const ServerTable& t : tables)
    if (t.memory_rows > 0) return true;
  return false;
}

Config OneTableConfig(const std::string& layer, int dim) {
  Config config;
  config.has_model = true;
  config.model.input = {1};
  config.model.sparse_fields = 1;
  LayerConfig emb;
  emb.name = layer;
  emb.type = LayerType::kEmbeddingBag;
  emb.vocab = int64_t{1} << 40;
  emb.dim = dim;
  config.model.wide = {emb};
  ParameterRule rule;
  rule.match = layer + ".weight";
  rule.init_in_server = true;
  config.parameters = {rule};
  return config;
}

}  // namespace pstrain
