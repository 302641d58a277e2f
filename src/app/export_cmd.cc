// pstrain export: a checkpoint's weights as an .npz numpy reads alone
// (roles/checkpoint_weights.h reads them, src/common/npz_writer.h writes).
// Tables are streamed, so a table with rows on the servers' disks exports in
// memory bounded by what the servers held in memory.
//   dense weight "<name>"   float32, its full shape (e.g. conv1.weight)
//   table "<name>"          "<name>.ids" int64 [n], ascending, and
//                           "<name>.rows" float32 [n, dim], row k for ids[k]
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "roles/checkpoint_weights.h"
#include "src/app/commands.h"
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

Status Export(const ExportOptions& o) {
  auto weights = CheckpointWeights::Open(o.checkpoint_dir);
  if (!weights.ok()) return weights.status();
  const ModelLayout& layout = (*weights)->layout();
  auto out = NpzWriter::Create(o.out_path);
  if (!out.ok()) return out.status();
  for (const LayoutTensor& t : layout.tensors) {
    auto values = (*weights)->Dense(t);
    if (!values.ok()) return values.status();
    PSTRAIN_RETURN_IF_ERROR((*out)->BeginArray(t.name, NpyType::kFloat32, t.shape));
    PSTRAIN_RETURN_IF_ERROR((*out)->Write(values->data(), values->size() * sizeof(float)));
    PSTRAIN_RETURN_IF_ERROR((*out)->EndArray());
  }
  int64_t table_rows = 0;
  for (const LayoutTable& t : layout.tables) {
    auto table = (*weights)->Table(t);
    if (!table.ok()) return table.status();
    PSTRAIN_RETURN_IF_ERROR(WriteTable(*table, **out));
    table_rows += table->rows();
  }
  PSTRAIN_RETURN_IF_ERROR((*out)->Finish());
  std::printf("exported step %lld of %s to %s: %zu dense weights, %zu tables (%lld rows)\n",
              static_cast<long long>((*weights)->ref().step), o.checkpoint_dir.c_str(),
              o.out_path.c_str(), layout.tensors.size(), layout.tables.size(),
              static_cast<long long>(table_rows));
  return Status::OK();
}

}  // namespace

int RunExport(const ExportOptions& options) {
  if (options.checkpoint_dir.empty() || options.out_path.empty()) {
    std::fputs("pstrain export: needs --checkpoint DIR and --out FILE.npz\n", stderr);
    return 2;
  }
  const std::string& out = options.out_path;
  if (out.size() < 4 || out.compare(out.size() - 4, 4, ".npz") != 0) {
    std::fprintf(stderr, "pstrain export: --out %s: only .npz is written\n", out.c_str());
    return 2;
  }
  Status st = Export(options);
  if (st.ok()) return 0;
  std::fprintf(stderr, "pstrain export: %s\n", st.message().c_str());
  return 1;
}

}  // namespace pstrain
