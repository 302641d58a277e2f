// A data set whose sample i has the single feature i, so that a batch
// names its samples: for tests of how the data is split (src/data/batcher.h).
#pragma once

#include <cstdint>

#include "src/data/dataset.h"

namespace pstrain::testing {

inline Dataset NumberedDataset(int64_t n) {
  Dataset d;
  d.sample_shape = {1};
  for (int64_t i = 0; i < n; ++i) {
    d.dense.push_back(static_cast<float>(i));
    d.labels.push_back(0);
  }
  return d;
}

}  // namespace pstrain::testing
