#include "roles/worker/remote_embeddings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "src/nn/model.h"

namespace pstrain {

StatusOr<std::unique_ptr<RemoteEmbeddings>> RemoteEmbeddings::Create(const PlacedModel& placed,
                                                                     UpdateMode mode) {
  auto remote = std::make_unique<RemoteEmbeddings>();
  auto groups = IdGroups::ForTables(placed.tables, placed.model_config.sparse_fields);
  if (!groups.ok()) return groups.status();
  remote->groups_ = std::move(*groups);
  remote->prefetch_groups_ = remote->groups_;
  const bool cached = mode != UpdateMode::kSync;
  for (size_t k = 0; k < placed.tables.size(); ++k) {
    const ServerTable& t = placed.tables[k];
    Table& table = remote->tables_.emplace_back();
    table.config = t;
    table.param = placed.TableParam(k);
    table.values = table.param->value.ptr();
    table.grads = table.param->grad.ptr();
    if (cached && t.cache_rows > 0)
      table.cache = std::make_unique<RowCache>(static_cast<size_t>(t.cache_rows), t.options.dim);
  }
  return remote;
}

RemoteEmbeddings::~RemoteEmbeddings() = default;

std::string RemoteEmbeddings::UnusedCacheWarning(const Config& config) {
  if (config.train.mode != UpdateMode::kSync) return "";
  auto tables = ServerTables(config);
  if (!tables.ok()) return "";
  std::vector<std::string> names;
  for (const ServerTable& t : *tables)
    if (t.cache_rows > 0) names.push_back("'" + t.options.name + "'");
  if (names.empty()) return "";
  return fmt::format(
      "cache_rows of {} {} {} not used in mode sync: every row may change at every step, so "
      "each step pulls its rows fresh (results are those without a cache); the row cache "
      "serves modes async and ssp",
      names.size() == 1 ? "table" : "tables", fmt::join(names, ", "),
      names.size() == 1 ? "is" : "are");
}

std::vector<float> RemoteEmbeddings::RowsInUse(const Param& param) const {
  size_t rows = 0;
  for (size_t k = 0; k < tables_.size(); ++k)
    if (tables_[k].param == &param) rows = groups_.unique(k).size();
  const size_t n =
      std::min(param.value.data.size(), rows * static_cast<size_t>(param.value.shape.back()));
  return std::vector<float>(param.value.data.begin(), param.value.data.begin() + n);
}

bool RemoteEmbeddings::Holds(const Param* param) const {
  for (const Table& t : tables_)
    if (t.param == param) return true;
  return false;
}

void RemoteEmbeddings::UseRowMemory(const Param* param, float* values, float* grads) {
  for (Table& t : tables_) {
    if (t.param != param) continue;
    t.values = values;
    t.grads = grads;
  }
}

bool RemoteEmbeddings::CanPrefetch() const {
  for (const Table& t : tables_)
    if (t.cache && t.config.cache_staleness >= 1) return true;
  return false;
}

bool RemoteEmbeddings::HasCache() const {
  for (const Table& t : tables_)
    if (t.cache) return true;
  return false;
}

void RemoteEmbeddings::EnablePrefetch(std::unique_ptr<SparseClient> client) {
  prefetch_client_ = std::move(client);
  prefetch_thread_ = std::make_unique<WorkThread>();
}

void RemoteEmbeddings::UseServers(std::vector<std::shared_ptr<Connection>> servers) {
  if (prefetch_client_) prefetch_client_->UseServers(std::move(servers));
}

void RemoteEmbeddings::UseWorkerRank(int rank) {
  if (prefetch_client_) prefetch_client_->UseWorkerRank(rank);
}

void RemoteEmbeddings::StartPrefetch(std::vector<int64_t> next_ids, int64_t step) {
  if (!prefetch_thread_ || prefetching_) return;
  prefetched_ = Completion<Status>();
  prefetching_ = true;
  prefetch_thread_->Post([this, ids = std::move(next_ids), step, done = prefetched_]() mutable {
    done.Set(Prefetch(*prefetch_client_, ids, step));
  });
}

// The caches are not touched by anyone else until FinishPrefetch.
Status RemoteEmbeddings::Prefetch(SparseClient& client, std::vector<int64_t>& next_ids,
                                  int64_t step) {
  prefetch_groups_.Reset(next_ids.data(), next_ids.size(), /*renumber=*/false);
  std::vector<RowTransfer> pulls;
  for (size_t k = 0; k < tables_.size(); ++k) {
    Table& t = tables_[k];
    t.ahead_ids.clear();
    t.ahead_index.Clear();
    if (!t.cache || t.config.cache_staleness < 1) continue;
    for (int64_t id : prefetch_groups_.unique(k))
      if (!t.cache->Has(id, step + 1, t.config.cache_staleness)) t.ahead_ids.push_back(id);
    t.ahead_rows.resize(t.ahead_ids.size() * t.config.options.dim);
    pulls.push_back(
        {&t.config.options.name, t.config.options.dim, &t.ahead_ids, t.ahead_rows.data()});
    prefetch_counts_.pulled_rows += static_cast<int64_t>(t.ahead_ids.size());
    prefetch_counts_.prefetched_rows += static_cast<int64_t>(t.ahead_ids.size());
  }
  PSTRAIN_RETURN_IF_ERROR(client.Pull(pulls, /*min_clock=*/0));
  prefetch_counts_.pulled_bytes += client.last_pull_bytes();
  for (Table& t : tables_)
    for (size_t k = 0; k < t.ahead_ids.size(); ++k)
      t.ahead_index.Insert(t.ahead_ids[k], static_cast<uint32_t>(k));
  return Status::OK();
}

Status RemoteEmbeddings::FinishPrefetch() {
  if (!prefetching_) return Status::OK();
  prefetching_ = false;
  Status st = prefetched_.Wait();
  counts_.pulled_rows += prefetch_counts_.pulled_rows;
  counts_.prefetched_rows += prefetch_counts_.prefetched_rows;
  counts_.pulled_bytes += prefetch_counts_.pulled_bytes;
  prefetch_counts_ = Counts();
  return st.WithContext("prefetching embedding rows");
}

Status RemoteEmbeddings::Gather(SparseClient& client, Batch* batch, int64_t min_clock, int64_t step,
                                bool use_cache) {
  PSTRAIN_RETURN_IF_ERROR(FinishPrefetch());
  groups_.Reset(batch->sparse.data(), batch->sparse.size(), /*renumber=*/true);
  // Every table's missing rows in one round of requests.
  std::vector<RowTransfer> pulls;
  for (size_t k = 0; k < tables_.size(); ++k) {
    Table& t = tables_[k];
    const std::vector<int64_t>& unique = groups_.unique(k);
    const int dim = t.config.options.dim;
    if (static_cast<int64_t>(unique.size()) * dim > t.param->value.size())
      return Internal(fmt::format("{} distinct ids do not fit table '{}''s {} rows", unique.size(),
                                  t.config.options.name, t.param->value.size() / dim));
    const size_t hits = ServeFromCache(t, unique, use_cache ? t.cache.get() : nullptr, step);
    if (use_cache) {
      counts_.ids += static_cast<int64_t>(unique.size());
      counts_.hits += static_cast<int64_t>(hits);
    }
    // Every row missing: they are rows 0..U-1 in order, so the replies
    // land in place.
    if (t.missing.size() == unique.size()) {
      pulls.push_back({&t.config.options.name, dim, &t.missing, t.values});
      continue;
    }
    t.pulled.resize(t.missing.size() * dim);
    pulls.push_back({&t.config.options.name, dim, &t.missing, t.pulled.data()});
  }
  PSTRAIN_RETURN_IF_ERROR(client.Pull(pulls, min_clock));
  for (size_t k = 0; k < tables_.size(); ++k) {
    Table& t = tables_[k];
    const int dim = t.config.options.dim;
    RowCache* cache = use_cache ? t.cache.get() : nullptr;
    const bool in_place = t.missing.size() == groups_.unique(k).size();
    for (size_t k = 0; k < t.missing.size(); ++k) {
      float* into = t.values + static_cast<size_t>(t.missing_at[k]) * dim;
      if (!in_place) std::memcpy(into, t.pulled.data() + k * dim, dim * sizeof(float));
      if (cache != nullptr) cache->Put(t.missing[k], into, step);
    }
    if (!use_cache) continue;  // evaluation: not counted
    counts_.pulled_rows += static_cast<int64_t>(t.missing.size());
  }
  if (use_cache) {
    counts_.pulled_bytes += client.last_pull_bytes();
    ++counts_.gathers;
  }
  return Status::OK();
}

size_t RemoteEmbeddings::ServeFromCache(Table& t, const std::vector<int64_t>& unique,
                                        RowCache* cache, int64_t step) {
  size_t hits = 0;
  const int dim = t.config.options.dim;
  t.missing.clear();
  t.missing_at.clear();
  for (size_t u = 0; u < unique.size(); ++u) {
    const float* cached =
        cache != nullptr ? cache->Get(unique[u], step, t.config.cache_staleness) : nullptr;
    float* into = t.values + u * dim;
    if (cached != nullptr) {
      std::memcpy(into, cached, dim * sizeof(float));
      ++hits;
      continue;
    }
    const uint32_t* ahead = cache != nullptr ? t.ahead_index.Find(unique[u]) : nullptr;
    if (ahead != nullptr) {  // prefetched: counted as pulled when it was
      const float* row = t.ahead_rows.data() + static_cast<size_t>(*ahead) * dim;
      std::memcpy(into, row, dim * sizeof(float));
      cache->Put(unique[u], row, step - 1);
      continue;
    }
    t.missing.push_back(unique[u]);
    t.missing_at.push_back(static_cast<uint32_t>(u));
  }
  if (cache != nullptr) t.ahead_index.Clear();
  return hits;
}

std::string RemoteEmbeddings::Describe(const Counts& now, const Counts& before) {
  const double ids = static_cast<double>(now.ids - before.ids);
  const double steps = static_cast<double>(std::max<int64_t>(1, now.gathers - before.gathers));
  const double hit_rate = ids > 0 ? static_cast<double>(now.hits - before.hits) / ids : 0.0;
  return fmt::format(
      "hit rate {:.3f}, {:.0f} rows ({:.1f} KiB) pulled per step, {:.0f} of them ahead", hit_rate,
      static_cast<double>(now.pulled_rows - before.pulled_rows) / steps,
      static_cast<double>(now.pulled_bytes - before.pulled_bytes) / steps / 1024,
      static_cast<double>(now.prefetched_rows - before.prefetched_rows) / steps);
}

std::string RemoteEmbeddings::DescribeSinceLast() {
  std::string line = Describe(counts_, described_);
  described_ = counts_;
  return line;
}

std::vector<const std::string*> RemoteEmbeddings::TableNames() const {
  std::vector<const std::string*> names;
  for (const Table& t : tables_) names.push_back(&t.config.options.name);
  return names;
}

Status RemoteEmbeddings::Scatter(SparseClient& client, int64_t clock) {
  std::vector<RowTransfer> pushes;
  for (size_t k = 0; k < tables_.size(); ++k) {
    const Table& t = tables_[k];
    pushes.push_back({&t.config.options.name, t.config.options.dim, &groups_.unique(k), t.grads});
  }
  return client.Push(pushes, clock);
}

}  // namespace pstrain
