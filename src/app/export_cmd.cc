// pstrain export: a checkpoint's weights as an .npz numpy reads alone
// (roles/checkpoint_weights.h reads them, src/common/npz_writer.h writes).
//   dense weight "<name>"   float32, its full shape (e.g. conv1.weight)
//   table "<name>"          "<name>.ids" int64 [n], ascending, and
//                           "<name>.rows" float32 [n, dim], row k for ids[k]
#include <fmt/format.h>

#include <cstdio>
#include <cstring>

#include "roles/checkpoint_weights.h"
#include "src/app/commands.h"
#include "src/common/npz_writer.h"

namespace pstrain {
namespace {

// Rows are copied out in chunks, so the output is streamed.
constexpr size_t kChunkRows = 4096;

Status WriteTable(const LayoutTable& t, const TableRows& rows, NpzWriter& out) {
  const auto n = static_cast<int64_t>(rows.ids.size());
  PSTRAIN_RETURN_IF_ERROR(out.BeginArray(t.name + ".ids", NpyType::kInt64, {n}));
  PSTRAIN_RETURN_IF_ERROR(out.Write(rows.ids.data(), rows.ids.size() * sizeof(int64_t)));
  PSTRAIN_RETURN_IF_ERROR(out.EndArray());
  PSTRAIN_RETURN_IF_ERROR(out.BeginArray(t.name + ".rows", NpyType::kFloat32, {n, t.dim}));
  const size_t row_bytes = static_cast<size_t>(t.dim) * sizeof(float);
  std::vector<uint8_t> chunk;
  for (size_t at = 0; at < rows.rows.size(); at += kChunkRows) {
    const size_t k = std::min(kChunkRows, rows.rows.size() - at);
    chunk.resize(k * row_bytes);
    for (size_t i = 0; i < k; ++i)
      std::memcpy(chunk.data() + i * row_bytes, rows.rows[at + i], row_bytes);
    PSTRAIN_RETURN_IF_ERROR(out.Write(chunk.data(), chunk.size()));
  }
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
    auto rows = (*weights)->Table(t);
    if (!rows.ok()) return rows.status();
    PSTRAIN_RETURN_IF_ERROR(WriteTable(t, *rows, **out));
    table_rows += static_cast<int64_t>(rows->ids.size());
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
