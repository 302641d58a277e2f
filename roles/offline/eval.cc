#include "roles/offline/eval.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "embedding/row_init.h"
#include "roles/checkpoint/weights.h"
#include "roles/placement/id_groups.h"
#include "roles/placement/placed_model.h"
#include "src/data/batcher.h"
#include "src/data/dataset.h"
#include "src/data/metrics.h"
#include "src/nn/model.h"

namespace pstrain {
namespace {

// Test samples per batch, as the trainer evaluates (roles/worker/trainer.cc).
constexpr int kEvalBatch = 1024;

struct EvalTable {
  EmbeddingTableOptions options;
  Param* param = nullptr;
  std::optional<CheckpointTable> rows;
};

// Copies the checkpoint's dense weights into the model, shapes checked.
Status LoadDense(const CheckpointWeights& w, Model& model, const std::string& source) {
  for (Param* p : model.params()) {
    const LayoutTensor* found = nullptr;
    for (const LayoutTensor& t : w.layout().tensors)
      if (t.name == p->name) found = &t;
    if (found == nullptr) {
      bool table = false;
      for (const LayoutTable& t : w.layout().tables) table = table || t.name == p->name;
      if (table) continue;  // its rows come batch by batch (GatherRows)
      return FailedPrecondition(fmt::format("{}: '{}' is not in {} (was the model changed?)",
                                            source, p->name, w.ref().step_dir));
    }
    if (found->shape != p->value.shape)
      return FailedPrecondition(
          fmt::format("{}: '{}' has another shape in {} (was the model changed?)", source, p->name,
                      w.ref().step_dir));
    auto values = w.Dense(*found);
    if (!values.ok()) return values.status();
    std::memcpy(p->value.ptr(), values->data(), values->size() * sizeof(float));
  }
  return Status::OK();
}

// The batch's ids renumbered 0..U-1 and each table's rows U put in its
// Param, as a training worker does with rows from the servers
// (roles/worker/remote_embeddings.h; rows on disk read batch by batch, so a
// table larger than memory evaluates).
Status GatherRows(IdGroups& groups, std::vector<EvalTable>& tables, Batch* batch) {
  groups.Reset(batch->sparse.data(), batch->sparse.size(), /*renumber=*/true);
  std::vector<char> found;
  for (size_t k = 0; k < tables.size(); ++k) {
    EvalTable& t = tables[k];
    const std::vector<int64_t>& ids = groups.unique(k);
    PSTRAIN_RETURN_IF_ERROR(t.rows->Gather(ids.data(), ids.size(), t.param->value.ptr(), &found));
    for (size_t u = 0; u < ids.size(); ++u)
      if (found[u] == 0) InitRow(t.options, ids[u], t.param->value.ptr() + u * t.options.dim);
  }
  return Status::OK();
}

}  // namespace

StatusOr<CheckpointMetric> EvaluateCheckpoint(const Config& config, const std::string& dir) {
  if (!config.has_model) return InvalidArgument(config.source + ": no model: section");
  if (!config.has_data) return InvalidArgument(config.source + ": no data: section");
  auto weights = CheckpointWeights::Open(dir);
  if (!weights.ok()) return weights.status();
  auto placed = PlaceModel(config, kEvalBatch);
  if (!placed.ok()) return placed.status();
  Model& model = *placed->model;
  PSTRAIN_RETURN_IF_ERROR(LoadDense(**weights, model, config.source));
  std::vector<EvalTable> tables;
  for (size_t k = 0; k < placed->tables.size(); ++k) {
    const ServerTable& st = placed->tables[k];
    EvalTable& t = tables.emplace_back();
    t.options = st.options;
    t.param = placed->TableParam(k);
    const LayoutTable* saved = nullptr;
    for (const LayoutTable& lt : (*weights)->layout().tables)
      if (lt.name == st.options.name) saved = &lt;
    if (saved == nullptr || saved->dim != st.options.dim)
      return FailedPrecondition(fmt::format("{}: table '{}' is not in {} with dim {}",
                                            config.source, st.options.name,
                                            (*weights)->ref().step_dir, st.options.dim));
    auto rows = (*weights)->Table(*saved);
    if (!rows.ok()) return rows.status();
    t.rows.emplace(std::move(*rows));
  }
  auto test = LoadWhole(config.data, config.data.test, "test");
  if (!test.ok()) return test.status();
  Batcher batcher = Batcher::ForEval(&*test, kEvalBatch);
  batcher.StartEpoch(0);
  TestMetric metric(config.model.loss);
  auto groups = IdGroups::ForTables(placed->tables, config.model.sparse_fields);
  if (!groups.ok()) return groups.status().WithContext(config.source);
  Batch batch;
  while (batcher.Next(&batch)) {
    if (!tables.empty()) PSTRAIN_RETURN_IF_ERROR(GatherRows(*groups, tables, &batch));
    metric.Add(model.Forward(batch, /*training=*/false), batch.labels);
  }
  return CheckpointMetric{(*weights)->ref().step, metric.value(), metric.Describe()};
}

}  // namespace pstrain
