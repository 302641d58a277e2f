// Worker-side preparation of a batch's embedding traffic: the ids of a batch
// deduplicated (each unique id is pulled and pushed once) and the
// per-occurrence gradients summed per unique id. (Grouping the unique ids by
// the server that holds them is placement: comm/ps/row_placement.h.)
//
// IdDedup keeps its buffers between batches, so a steady-state step allocates
// nothing. Not thread-safe: one per worker thread that prepares batches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "embedding/id_map.h"

namespace pstrain {

class IdDedup {
 public:
  // Deduplicates ids[0, n): unique() in order of first appearance, and
  // inverse()[i] the position of ids[i] in unique(). O(n).
  void Reset(const int64_t* ids, size_t n);

  const std::vector<int64_t>& unique() const { return unique_; }
  const std::vector<uint32_t>& inverse() const { return inverse_; }

 private:
  FlatIdMap<uint32_t> positions_;
  std::vector<int64_t> unique_;
  std::vector<uint32_t> inverse_;
};

// out[u] = sum of grads[i] over the occurrences i with inverse[i] == u: each
// grads[i] and out[u] are dim floats. *out is resized to num_unique * dim.
// Occurrences are added in batch order, so the sum is the same on every run.
void SumGradients(const std::vector<uint32_t>& inverse, size_t num_unique, const float* grads,
                  int dim, std::vector<float>* out);

}  // namespace pstrain
