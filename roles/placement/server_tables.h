// The embedding tables a config puts on the servers: every embedding_bag
// layer whose weight ("<layer>.weight") matches a parameters: rule with
// init_in_server: true. Servers build their share of each from this list;
// workers pull and push its rows instead of holding the table.
#pragma once

#include <string>
#include <vector>

#include "embedding/table_options.h"
#include "src/common/config/config.h"

namespace pstrain {

struct ServerTable {
  EmbeddingTableOptions options;  // name: the parameter, "<layer>.weight"
  int64_t cache_rows = 0;         // worker-side cache, rows
  int64_t cache_staleness = 0;    // steps a cached row may be old (async/ssp)
  // Rows a server keeps in memory, the rest on its disk (server_cache_rows,
  // or server_cache_bytes in rows); 0: all in memory.
  int64_t memory_rows = 0;
  // The id slots of a sample its layer reads (LayerConfig::slots; empty:
  // all): which of a batch's ids are its rows.
  std::vector<int> slots;
};

// Where server `rank` keeps the table rows beyond their memory budget:
// <train.store_dir, or ./pstrain-store>/server-<rank>.
std::string ServerStoreDir(const Config& config, int rank);
bool HasMemoryBudget(const std::vector<ServerTable>& tables);

// Errors name the config line: an init_in_server rule that matches a
// parameter other than an embedding_bag's weight, an initializer tables do
// not have, a model that mixes server-held and worker-held embedding
// tables (a worker renumbers a batch's ids in place for the server-held
// ones, which a worker-held table reading the same slots would then
// misread), or server-held tables that read some of the same columns but
// not all (id_groups.h).
StatusOr<std::vector<ServerTable>> ServerTables(const Config& config);

// The smallest config with one server-held table: a model of one
// embedding_bag layer `layer` (any id >= 0, `dim` floats a row) whose
// weight, "<layer>.weight", is init_in_server. For benchmarks and tests
// that drive the table directly.
Config OneTableConfig(const std::string& layer, int dim);

}  // namespace pstrain
