#include "roles/remote_embeddings.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "src/nn/model.h"

namespace pstrain {

StatusOr<std::unique_ptr<RemoteEmbeddings>> RemoteEmbeddings::Create(const Config& config,
                                                                     ModelConfig* model,
                                                                     int max_batch) {
  auto tables = ServerTables(config);
  if (!tables.ok()) return tables.status();
  auto remote = std::make_unique<RemoteEmbeddings>();
  if (tables->empty()) return remote;
  const int64_t rows = static_cast<int64_t>(max_batch) * std::max(1, model->sparse_fields);
  // NamedLayers gives the names Model::Build will use, in list order.
  std::vector<LayerConfig> named = NamedLayers(*model);
  size_t k = 0;
  for (std::vector<LayerConfig>* list : {&model->layers, &model->wide, &model->deep}) {
    for (LayerConfig& layer : *list) {
      const std::string param = named[k++].name + ".weight";
      for (const ServerTable& t : *tables)
        if (t.options.name == param) layer.vocab = rows;
    }
  }
  const bool cached = config.train.mode != UpdateMode::kSync;
  for (ServerTable& t : *tables) {
    std::unique_ptr<RowCache> cache;
    if (cached && t.cache_rows > 0)
      cache = std::make_unique<RowCache>(static_cast<size_t>(t.cache_rows), t.options.dim);
    remote->tables_.push_back({std::move(t), nullptr, std::move(cache)});
  }
  return remote;
}

RemoteEmbeddings::~RemoteEmbeddings() = default;

Status RemoteEmbeddings::Bind(const std::vector<Param*>& params) {
  for (Table& t : tables_) {
    for (Param* p : params)
      if (p->name == t.config.options.name) t.param = p;
    if (t.param == nullptr)
      return Internal(fmt::format("the model has no parameter '{}'", t.config.options.name));
  }
  return Status::OK();
}

bool RemoteEmbeddings::Holds(const Param* param) const {
  for (const Table& t : tables_)
    if (t.param == param) return true;
  return false;
}

Status RemoteEmbeddings::Gather(SparseClient& client, Batch* batch, int64_t min_clock, int64_t step,
                                bool use_cache) {
  dedup_.Reset(batch->sparse.data(), batch->sparse.size());
  unique_ = dedup_.unique();
  const std::vector<uint32_t>& inverse = dedup_.inverse();
  for (size_t i = 0; i < batch->sparse.size(); ++i) batch->sparse[i] = inverse[i];
  // Every table's missing rows in one round of requests.
  std::vector<RowTransfer> pulls;
  for (Table& t : tables_) {
    const int dim = t.config.options.dim;
    if (static_cast<int64_t>(unique_.size()) * dim > t.param->value.size())
      return Internal(fmt::format("{} distinct ids do not fit table '{}''s {} rows", unique_.size(),
                                  t.config.options.name, t.param->value.size() / dim));
    ServeFromCache(t, use_cache ? t.cache.get() : nullptr, step);
    t.pulled.resize(t.missing.size() * dim);
    pulls.push_back({&t.config.options.name, dim, &t.missing, t.pulled.data()});
  }
  PSTRAIN_RETURN_IF_ERROR(client.Pull(pulls, min_clock));
  for (Table& t : tables_) {
    const int dim = t.config.options.dim;
    RowCache* cache = use_cache ? t.cache.get() : nullptr;
    for (size_t k = 0; k < t.missing.size(); ++k) {
      const float* row = t.pulled.data() + k * dim;
      std::memcpy(t.param->value.ptr() + static_cast<size_t>(t.missing_at[k]) * dim, row,
                  dim * sizeof(float));
      if (cache != nullptr) cache->Put(t.missing[k], row, step);
    }
    if (!use_cache) continue;  // evaluation: not counted
    counts_.ids += static_cast<int64_t>(unique_.size());
    counts_.hits += static_cast<int64_t>(unique_.size() - t.missing.size());
    counts_.pulled_rows += static_cast<int64_t>(t.missing.size());
  }
  if (use_cache) {
    counts_.pulled_bytes += client.last_pull_bytes();
    ++counts_.gathers;
  }
  return Status::OK();
}

void RemoteEmbeddings::ServeFromCache(Table& t, RowCache* cache, int64_t step) {
  const int dim = t.config.options.dim;
  t.missing.clear();
  t.missing_at.clear();
  for (size_t u = 0; u < unique_.size(); ++u) {
    const float* cached =
        cache != nullptr ? cache->Get(unique_[u], step, t.config.cache_staleness) : nullptr;
    if (cached != nullptr) {
      std::memcpy(t.param->value.ptr() + u * dim, cached, dim * sizeof(float));
    } else {
      t.missing.push_back(unique_[u]);
      t.missing_at.push_back(static_cast<uint32_t>(u));
    }
  }
}

std::string RemoteEmbeddings::Describe(const Counts& now, const Counts& before) {
  const double ids = static_cast<double>(now.ids - before.ids);
  const double steps = static_cast<double>(std::max<int64_t>(1, now.gathers - before.gathers));
  const double hit_rate = ids > 0 ? static_cast<double>(now.hits - before.hits) / ids : 0.0;
  return fmt::format("hit rate {:.3f}, {:.0f} rows ({:.1f} KiB) pulled per step", hit_rate,
                     static_cast<double>(now.pulled_rows - before.pulled_rows) / steps,
                     static_cast<double>(now.pulled_bytes - before.pulled_bytes) / steps / 1024);
}

Status RemoteEmbeddings::Scatter(SparseClient& client, int64_t clock) {
  std::vector<RowTransfer> pushes;
  for (Table& t : tables_)
    pushes.push_back({&t.config.options.name, t.config.options.dim, &unique_, t.param->grad.ptr()});
  return client.Push(pushes, clock);
}

}  // namespace pstrain
