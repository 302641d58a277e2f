// ModelLayout: what a checkpoint needs to be read without the job that wrote
// it: every weight's name, full shape and where its values are kept. Worker 0
// writes it into every checkpoint step (file "model-layout", listed in the
// MANIFEST and checksummed like the others), since server partitions and
// tables carry no shapes.
//
//   section "layout", text lines:
//     "layout 1"
//     "tensor <name> <ps|allreduced> <d0>,<d1>,..."   a dense weight
//     "table <name> <dim>"                            a server-held table
//   section "data" (when the job reads text data by a schema): how a line
//     becomes the model's inputs, as JSON (src/data/schema_reader.h,
//     SchemaJson), which `pstrain export` hands on with the weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "roles/checkpoint/step_files.h"
#include "src/common/config/config.h"
#include "src/common/status.h"
#include "src/common/tensor.h"

namespace pstrain {

enum class WeightPlace { kServers, kAllReduced };

struct LayoutTensor {
  std::string name;
  WeightPlace place = WeightPlace::kServers;
  Shape shape;
};

struct LayoutTable {
  std::string name;  // "<layer>.weight"
  int64_t dim = 0;
};

struct ModelLayout {
  std::vector<LayoutTensor> tensors;  // in the model's parameter order
  std::vector<LayoutTable> tables;
  std::string data_schema;  // JSON; empty: none recorded
};

// The layout of the model `config` describes, its weights placed as
// training places them (roles/placement/placed_model.h).
StatusOr<ModelLayout> LayoutOf(const Config& config);

// Writes the layout into `step_dir`; returns the file's name there.
StatusOr<std::string> WriteModelLayout(const std::string& step_dir, const ModelLayout& layout);
// Reads and checks it: names, places and shapes (at most 8 dimensions, each
// positive, at most 2^40 elements in all).
StatusOr<ModelLayout> ReadModelLayout(const std::string& path);

}  // namespace pstrain
