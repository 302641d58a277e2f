// ExportCheckpoint: a checkpoint's weights as an .npz numpy reads alone
// (pstrain export; roles/checkpoint/weights.h reads them,
// src/common/npz_writer.h writes):
//   dense weight "<name>"   float32, its full shape (e.g. conv1.weight)
//   table "<name>"          "<name>.ids" int64 [n], ascending, and
//                           "<name>.rows" float32 [n, dim], row k for ids[k]
//   "data_schema"           uint8 [n]: JSON text, how a data line becomes
//                           the model's inputs and ids (text formats only;
//                           src/data/schema_reader.h SchemaJson)
// Tables are streamed, from the shard files and the servers' store
// checkpoints, so a table with rows on disk exports in memory bounded by
// what the servers held in memory, whatever the rows on disk. The file
// appears only when complete (NpzWriter).
#pragma once

#include <cstdint>
#include <string>

#include "src/common/status.h"

namespace pstrain {

inline constexpr char kDataSchemaArray[] = "data_schema";

struct ExportSummary {
  int64_t step = 0;  // of the checkpoint exported
  size_t dense = 0;  // dense weights written
  size_t tables = 0;
  int64_t table_rows = 0;  // of every table
};

StatusOr<ExportSummary> ExportCheckpoint(const std::string& checkpoint_dir,
                                         const std::string& out_path);

}  // namespace pstrain
