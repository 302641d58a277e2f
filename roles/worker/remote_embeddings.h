// RemoteEmbeddings: a worker's side of the embedding tables held by the
// servers (roles/placement/server_tables.h) while it trains.
//
// The worker's model keeps, for each such table, only room for one batch's
// rows: the layer's `vocab` becomes the most distinct ids a batch can have
// (batch x the slots it reads; roles/placement/placed_model.h). Each step:
//   Gather: the batch's ids are deduplicated (U unique ids) and renumbered
//     0..U-1 in place, per set of slots the tables read
//     (roles/placement/id_groups.h), and each table's U rows are pulled into rows 0..U-1
//     of its Param: one request per server and table. Rows no cache serves
//     land there straight from the replies (with every row pulled, that is
//     all of them); UseRowMemory moves that place to pinned memory of the
//     GPU model, so they go up to the device without another host copy.
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
// Prefetch (with the cache): while a batch computes, a thread pulls the
// rows of the next batch's ids that the cache will not have, so the next
// Gather finds them at hand. They are one step old when used, so
// cache_staleness must be at least 1.
//
// Threads: the training thread's. Ownership: Params belong to the model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/ps/sparse_client.h"
#include "comm/transport/completion.h"
#include "embedding/id_map.h"
#include "embedding/row_cache.h"
#include "roles/placement/id_groups.h"
#include "roles/placement/placed_model.h"
#include "roles/placement/server_tables.h"
#include "src/common/batch.h"
#include "src/common/work_thread.h"
#include "src/nn/layer.h"

namespace pstrain {

class RemoteEmbeddings {
 public:
  // The worker's side of `placed`'s server-held tables, bound to their
  // Params in placed.model (which must outlive it). Row caches only in
  // modes async and ssp (above).
  static StatusOr<std::unique_ptr<RemoteEmbeddings>> Create(const PlacedModel& placed,
                                                            UpdateMode mode);
  ~RemoteEmbeddings();
  // The one line worker 0 logs at start when a rule asks for a row cache
  // that sync mode leaves off (above), else "".
  static std::string UnusedCacheWarning(const Config& config);

  bool empty() const { return tables_.empty(); }
  // Whether `param` is a server-held table's.
  bool Holds(const Param* param) const;
  // A held table's rows for the last Gather's ids, in the order its batch
  // refers to them (the rest of the Param is rows of earlier batches).
  std::vector<float> RowsInUse(const Param& param) const;
  // From now on `param`'s table takes its rows from `values` and pushes its
  // gradient from `grads` (each as large as the Param, e.g.
  // GpuModel::PinTable's) instead of the Param's own tensors.
  void UseRowMemory(const Param* param, float* values, float* grads);

  // `step`: the worker's step, which dates cached rows. Evaluation passes
  // use_cache false: it pulls every row fresh and caches none.
  Status Gather(SparseClient& client, Batch* batch, int64_t min_clock, int64_t step,
                bool use_cache = true);
  Status Scatter(SparseClient& client, int64_t clock);
  // The tables' names, in the order Scatter sends them.
  std::vector<const std::string*> TableNames() const;

  // Whether some table has a worker-side row cache (async and ssp only).
  bool HasCache() const;
  // Whether prefetching helps: a table with a cache and staleness >= 1.
  bool CanPrefetch() const;
  // Gives the prefetch thread its own client (the training thread's may be
  // busy pushing at the same time).
  void EnablePrefetch(std::unique_ptr<SparseClient> client);
  // Begins pulling, on the prefetch thread, the rows of `next_ids` that the
  // caches will not have at `step` + 1. The next Gather waits for it. Call
  // after Gather, before the batch computes; nothing happens unless
  // EnablePrefetch was called.
  void StartPrefetch(std::vector<int64_t> next_ids, int64_t step);
  // Waits for a prefetch in flight (the next Gather does it too).
  Status FinishPrefetch();
  // The job's servers changed live (roles/worker/grow.h): the prefetch
  // client places rows over `servers` from now on. Not during a prefetch.
  void UseServers(std::vector<std::shared_ptr<Connection>> servers);
  // A live change of workers gave this worker another rank: the prefetch
  // client's requests name it. Not during a prefetch.
  void UseWorkerRank(int rank);

  // Counts since the start (ids: per table, unique per batch).
  struct Counts {
    int64_t ids = 0, hits = 0, pulled_rows = 0, pulled_bytes = 0, gathers = 0;
    int64_t prefetched_rows = 0;  // of pulled_rows, pulled ahead of time
  };
  const Counts& counts() const { return counts_; }
  // "hit rate 0.71, 1200 rows (75.0 KiB) pulled per step, 800 of them
  // ahead" since `before`.
  static std::string Describe(const Counts& now, const Counts& before);
  // Describe(counts(), the counts at the previous call, or at the start):
  // the progress log's line.
  std::string DescribeSinceLast();

 private:
  struct Table {
    ServerTable config;
    Param* param = nullptr;
    float* values = nullptr;  // its rows: the Param's, or UseRowMemory's
    float* grads = nullptr;
    std::unique_ptr<RowCache> cache;  // null: none
    // Scratch of Gather: the ids to pull, their positions among the unique ids, and
    // their rows when they cannot land in place.
    std::vector<int64_t> missing;
    std::vector<uint32_t> missing_at;
    std::vector<float> pulled;
    // Rows pulled ahead for the next Gather (prefetch thread until then).
    std::vector<int64_t> ahead_ids;
    std::vector<float> ahead_rows;
    FlatIdMap<uint32_t> ahead_index;
  };
  // On the prefetch thread.
  Status Prefetch(SparseClient& client, std::vector<int64_t>& next_ids, int64_t step);

  // Rows the cache has, or the prefetch brought, go to the Param; the
  // others to t.missing. Returns the cache's hits.
  size_t ServeFromCache(Table& t, const std::vector<int64_t>& unique, RowCache* cache,
                        int64_t step);

  std::vector<Table> tables_;
  IdGroups groups_;  // the last Gather's batch: each table's unique ids are its rows
  Counts counts_;
  Counts described_;  // at the last DescribeSinceLast
  // Prefetch: its client, its thread (declared after: joins first), its
  // completion and counts.
  std::unique_ptr<SparseClient> prefetch_client_;
  std::unique_ptr<WorkThread> prefetch_thread_;
  bool prefetching_ = false;
  Completion<Status> prefetched_;
  IdGroups prefetch_groups_;  // prefetch thread
  Counts prefetch_counts_;    // prefetch thread until FinishPrefetch
};

}  // namespace pstrain
