// CheckpointWeights: the weights of a complete checkpoint, read without the
// job that wrote it (pstrain export and eval). Dense weights are put back
// together from the servers' partitions and worker 0's all-reduced file, with
// the shapes of the checkpoint's model layout (roles/model_layout.h);
// server-held tables are listed row by row, sorted by id, straight from the
// shard files' bytes (a table is in memory once, as read).
//
// Every file is verified against the MANIFEST (size, CRC) before it is
// used, and every count inside it is checked against the bytes present, so a
// damaged or hostile checkpoint is an error naming the file, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "roles/model_layout.h"
#include "src/common/checkpoint_file.h"

namespace pstrain {

// A table's rows, ascending ids; row k's dim floats start at rows[k]
// (unaligned: copy them out with memcpy). Points into CheckpointWeights.
struct TableRows {
  int64_t dim = 0;
  std::vector<int64_t> ids;
  std::vector<const uint8_t*> rows;
  // The index of `id`, or -1.
  int64_t Find(int64_t id) const;
};

class CheckpointWeights {
 public:
  // The newest complete checkpoint under `dir` (train.checkpoint.dir). A
  // newer step that is damaged (not merely partial), and a checkpoint
  // without a model layout (written before it was recorded), are errors
  // saying so.
  static StatusOr<std::unique_ptr<CheckpointWeights>> Open(const std::string& dir);

  const CheckpointRef& ref() const { return ref_; }
  const ModelLayout& layout() const { return layout_; }
  // Dense weight `t`'s values in C order, NumElements(t.shape) floats.
  StatusOr<std::vector<float>> Dense(const LayoutTensor& t) const;
  // Every row of table `t` the checkpoint holds, from every server.
  StatusOr<TableRows> Table(const LayoutTable& t) const;

 private:
  CheckpointWeights() = default;
  struct File {
    std::string path;
    std::vector<Section> sections;
  };
  CheckpointRef ref_;
  ModelLayout layout_;
  std::vector<File> shards_;  // the servers' files
  File allreduced_;           // worker 0's, when listed
};

}  // namespace pstrain
