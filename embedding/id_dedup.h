// Worker-side preparation of a batch's embedding traffic: the ids of a batch
// deduplicated (each unique id is pulled and pushed once), grouped by the
// server that holds them (one message per server), and the per-occurrence
// gradients summed per unique id.
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

// Unique ids grouped by server (ServerOfId), in CSR form: server s's ids are
// ids[offsets[s], offsets[s + 1]), each at position unique_index[k] of the
// unique list they came from. Within a server, ids keep their order.
struct ServerGroups {
  std::vector<size_t> offsets;  // servers + 1 entries
  std::vector<int64_t> ids;
  std::vector<uint32_t> unique_index;

  size_t size(int server) const { return offsets[server + 1] - offsets[server]; }
  const int64_t* ids_of(int server) const { return ids.data() + offsets[server]; }
};

// Fills *out for `unique` (distinct ids) over `servers` > 0 servers. O(n).
void GroupByServer(const std::vector<int64_t>& unique, int servers, ServerGroups* out);

// out[u] = sum of grads[i] over the occurrences i with inverse[i] == u: each
// grads[i] and out[u] are dim floats. *out is resized to num_unique * dim.
// Occurrences are added in batch order, so the sum is the same on every run.
void SumGradients(const std::vector<uint32_t>& inverse, size_t num_unique, const float* grads,
                  int dim, std::vector<float>* out);

}  // namespace pstrain
