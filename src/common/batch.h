// Batch: what a worker trains on for one step. Image data fills `dense`
// ([N, C, H, W]); click data fills `dense` ([N, 13]) and `sparse` (hashed
// categorical ids, [N, fields] row-major).
#pragma once

#include <cstdint>
#include <vector>

#include "src/common/tensor.h"

namespace pstrain {

struct Batch {
  Tensor dense;
  std::vector<int64_t> sparse;  // size N * fields; ids in [0, vocab)
  int fields = 0;
  // Size N * fields, each id's weight in its embedding_bag's sum; empty when
  // every id weighs 1 (src/data/dataset.h).
  std::vector<float> sparse_weights;
  std::vector<float> labels;  // size N: class index (0..C-1) or click (0/1)
  // Each sample's index in its dataset, when the Batcher was asked to record
  // them (Batcher::RecordSampleIds: tests count what an epoch trained).
  std::vector<int64_t> sample_ids;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

}  // namespace pstrain
