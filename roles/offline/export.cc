#include "roles/offline/export.h"

#include <vector>

#include "roles/checkpoint/weights.h"
#include "src/common/npz_writer.h"

namespace pstrain {
namespace {

// Rows are written in chunks of this many, as they stream by.
constexpr size_t kChunkRows = 4096;

// Two passes over the table's rows, in id order (from memory and disk): the
// ids, then the values. Memory: one chunk, whatever the table's size.
Status WriteTable(const CheckpointTable& table, NpzWriter& out) {
  const int64_t n = table.rows();
  std::vector<int64_t> ids;
  ids.reserve(kChunkRows);
  PSTRAIN_RETURN_IF_ERROR(out.BeginArray(table.name() + ".ids", NpyType::kInt64, {n}));
  PSTRAIN_RETURN_IF_ERROR(table.ForEachRow([&](int64_t id, const float*) -> Status {
    ids.push_back(id);
    if (ids.size() < kChunkRows) return Status::OK();
    Status st = out.Write(ids.data(), ids.size() * sizeof(int64_t));
    ids.clear();
    return st;
  }));
  PSTRAIN_RETURN_IF_ERROR(out.Write(ids.data(), ids.size() * sizeof(int64_t)));
  PSTRAIN_RETURN_IF_ERROR(out.EndArray());
  const auto dim = static_cast<size_t>(table.dim());
  std::vector<float> rows;
  rows.reserve(kChunkRows * dim);
  PSTRAIN_RETURN_IF_ERROR(
      out.BeginArray(table.name() + ".rows", NpyType::kFloat32, {n, table.dim()}));
  PSTRAIN_RETURN_IF_ERROR(table.ForEachRow([&](int64_t, const float* values) -> Status {
    rows.insert(rows.end(), values, values + dim);
    if (rows.size() < kChunkRows * dim) return Status::OK();
    Status st = out.Write(rows.data(), rows.size() * sizeof(float));
    rows.clear();
    return st;
  }));
  PSTRAIN_RETURN_IF_ERROR(out.Write(rows.data(), rows.size() * sizeof(float)));
  return out.EndArray();
}

}  // namespace

StatusOr<ExportSummary> ExportCheckpoint(const std::string& checkpoint_dir,
                                         const std::string& out_path) {
  auto weights = CheckpointWeights::Open(checkpoint_dir);
  if (!weights.ok()) return weights.status();
  const ModelLayout& layout = (*weights)->layout();
  auto out = NpzWriter::Create(out_path);
  if (!out.ok()) return out.status();
  for (const LayoutTensor& t : layout.tensors) {
    auto values = (*weights)->Dense(t);
    if (!values.ok()) return values.status();
    PSTRAIN_RETURN_IF_ERROR((*out)->BeginArray(t.name, NpyType::kFloat32, t.shape));
    PSTRAIN_RETURN_IF_ERROR((*out)->Write(values->data(), values->size() * sizeof(float)));
    PSTRAIN_RETURN_IF_ERROR((*out)->EndArray());
  }
  ExportSummary summary;
  for (const LayoutTable& t : layout.tables) {
    auto table = (*weights)->Table(t);
    if (!table.ok()) return table.status();
    PSTRAIN_RETURN_IF_ERROR(WriteTable(*table, **out));
    summary.table_rows += table->rows();
  }
  // How the data's lines become the model's ids and inputs: JSON bytes.
  if (!layout.data_schema.empty()) {
    const std::string& schema = layout.data_schema;
    PSTRAIN_RETURN_IF_ERROR((*out)->BeginArray(kDataSchemaArray, NpyType::kUint8,
                                               {static_cast<int64_t>(schema.size())}));
    PSTRAIN_RETURN_IF_ERROR((*out)->Write(schema.data(), schema.size()));
    PSTRAIN_RETURN_IF_ERROR((*out)->EndArray());
  }
  PSTRAIN_RETURN_IF_ERROR((*out)->Finish());
  summary.step = (*weights)->ref().step;
  summary.dense = layout.tensors.size();
  summary.tables = layout.tables.size();
  return summary;
}

}  // namespace pstrain
