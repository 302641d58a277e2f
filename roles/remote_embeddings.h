// RemoteEmbeddings: a worker's side of the embedding tables held by the
// servers (roles/server_tables.h) while it trains.
//
// The worker's model keeps, for each such table, only room for one batch's
// rows: the layer's `vocab` becomes the most distinct ids a batch can have
// (batch x fields). Each step:
//   Gather: the batch's ids are deduplicated (U unique ids) and renumbered
//     0..U-1 in place, and each table's U rows are pulled into rows 0..U-1
//     of its Param: one request per server and table.
//   forward and backward run unchanged on that small table; the gradient of
//     row u is the sum over the batch's occurrences of unique id u.
//   Scatter: each table's U gradient rows are pushed to their servers.
// Rows beyond U are never read, so they need no clearing.
//
// Row cache (cache_rows > 0, modes async and ssp): a row pulled at step s is
// used again without asking its server until step s + cache_staleness (the
// rule's cache_staleness), so hot ids are not pulled every step. In sync
// mode every row may have changed at every step, so the cache is not used:
// results are exactly those without it.
//
// Threads: the training thread's. Ownership: Params belong to the model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "embedding/id_dedup.h"
#include "embedding/row_cache.h"
#include "roles/server_tables.h"
#include "roles/sparse_client.h"
#include "src/data/batch.h"
#include "src/nn/layer.h"

namespace pstrain {

class RemoteEmbeddings {
 public:
  // Finds the server-held tables of `config` and rewrites their layers in
  // `model` (a copy of config.model) to hold `max_batch` samples' rows.
  static StatusOr<std::unique_ptr<RemoteEmbeddings>> Create(const Config& config,
                                                            ModelConfig* model, int max_batch);
  ~RemoteEmbeddings();

  bool empty() const { return tables_.empty(); }
  // Binds each table to its Param in the built model's params().
  Status Bind(const std::vector<Param*>& params);
  bool Holds(const Param* param) const;

  // `step`: the worker's step, which dates cached rows. Evaluation passes
  // use_cache false: it pulls every row fresh and caches none.
  Status Gather(SparseClient& client, Batch* batch, int64_t min_clock, int64_t step,
                bool use_cache = true);
  Status Scatter(SparseClient& client, int64_t clock);

  // Counts since the start (ids: per table, unique per batch).
  struct Counts {
    int64_t ids = 0, hits = 0, pulled_rows = 0, pulled_bytes = 0, gathers = 0;
  };
  const Counts& counts() const { return counts_; }
  // "hit rate 0.71, 1200 rows (75.0 KiB) pulled per step" since `before`.
  static std::string Describe(const Counts& now, const Counts& before);

 private:
  struct Table {
    ServerTable config;
    Param* param = nullptr;
    std::unique_ptr<RowCache> cache;  // null: none
    // Scratch of Gather: the ids to pull, their positions in unique_, and
    // their rows.
    std::vector<int64_t> missing;
    std::vector<uint32_t> missing_at;
    std::vector<float> pulled;
  };
  // Rows the cache has go to the Param; the others to t.missing.
  void ServeFromCache(Table& t, RowCache* cache, int64_t step);

  std::vector<Table> tables_;
  IdDedup dedup_;
  std::vector<int64_t> unique_;  // of the last Gather
  Counts counts_;
};

}  // namespace pstrain
