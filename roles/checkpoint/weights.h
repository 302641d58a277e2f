// CheckpointWeights: the weights of a complete checkpoint, read without the
// job that wrote it (pstrain export and eval). Dense weights are put back
// together from the servers' partitions and worker 0's all-reduced file, with
// the shapes of the checkpoint's model layout (roles/checkpoint/model_layout.h);
// server-held tables are read row by row, in id order, straight from the
// shard files' bytes and, for tables with rows on disk, from the servers'
// store checkpoints (roles/checkpoint/table.h).
//
// Every file is verified against the MANIFEST (size, CRC) before it is
// used, every store file against its shard file's list (CheckStoreFiles),
// and every count inside them is checked against the bytes present, so a
// damaged or hostile checkpoint is an error naming the file, never a crash.
// A store checkpoint is read through a copy restored into a scratch
// directory under TMPDIR (hard links where it can: RowStore::Restore),
// removed with the object, also when Open fails: the checkpoint itself is
// never changed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embedding/row_store.h"
#include "roles/checkpoint/model_layout.h"
#include "roles/checkpoint/table.h"
#include "src/common/checkpoint_file.h"

namespace pstrain {

class CheckpointWeights {
 public:
  // The newest complete checkpoint under `dir` (train.checkpoint.dir). A
  // newer step that is damaged (not merely partial), and a checkpoint
  // without a model layout (written before it was recorded), are errors
  // saying so. A step's own directory (`<dir>/step-<N>`, say the one
  // `<dir>/BEST` names) opens that step.
  static StatusOr<std::unique_ptr<CheckpointWeights>> Open(const std::string& dir);
  ~CheckpointWeights();

  const CheckpointRef& ref() const { return ref_; }
  const ModelLayout& layout() const { return layout_; }
  // Dense weight `t`'s values in C order, NumElements(t.shape) floats.
  StatusOr<std::vector<float>> Dense(const LayoutTensor& t) const;
  // Table `t` as the checkpoint holds it, from every server: points into
  // this object, which must outlive it. Once per table when it has rows on
  // disk (each opens the table in the restored stores; a second is an error).
  StatusOr<CheckpointTable> Table(const LayoutTable& t) const;

 private:
  CheckpointWeights() = default;
  struct File {
    std::string path;
    std::vector<Section> sections;
    RowStore* store = nullptr;  // its store checkpoint, restored; in stores_
  };
  // Checks and restores the store checkpoint a shard file lists.
  Status RestoreStore(const std::string& name, File* shard);

  CheckpointRef ref_;
  ModelLayout layout_;
  std::vector<File> shards_;  // the servers' files
  File allreduced_;           // worker 0's, when listed
  std::string scratch_;       // made for the first store; removed last
  std::vector<std::unique_ptr<RowStore>> stores_;
};

}  // namespace pstrain
