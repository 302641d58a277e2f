#include "embedding/id_dedup.h"

#include <algorithm>
#include <cassert>

#include "embedding/placement.h"

namespace pstrain {

void IdDedup::Reset(const int64_t* ids, size_t n) {
  positions_.Clear();
  positions_.Reserve(n);
  unique_.clear();
  inverse_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto [position, inserted] =
        positions_.Insert(ids[i], static_cast<uint32_t>(unique_.size()));
    if (inserted) unique_.push_back(ids[i]);
    inverse_[i] = *position;
  }
}

void GroupByServer(const std::vector<int64_t>& unique, int servers, ServerGroups* out) {
  assert(servers > 0);
  // Counting sort by server: count, prefix-sum, place.
  std::vector<size_t>& offsets = out->offsets;
  offsets.assign(static_cast<size_t>(servers) + 1, 0);
  for (int64_t id : unique) ++offsets[ServerOfId(id, servers) + 1];
  for (int s = 0; s < servers; ++s) offsets[s + 1] += offsets[s];
  out->ids.resize(unique.size());
  out->unique_index.resize(unique.size());
  std::vector<size_t> next(offsets.begin(), offsets.end() - 1);
  for (size_t u = 0; u < unique.size(); ++u) {
    const size_t k = next[ServerOfId(unique[u], servers)]++;
    out->ids[k] = unique[u];
    out->unique_index[k] = static_cast<uint32_t>(u);
  }
}

void SumGradients(const std::vector<uint32_t>& inverse, size_t num_unique, const float* grads,
                  int dim, std::vector<float>* out) {
  const auto d = static_cast<size_t>(dim);
  out->assign(num_unique * d, 0.0f);
  for (size_t i = 0; i < inverse.size(); ++i) {
    assert(inverse[i] < num_unique);
    float* sum = out->data() + inverse[i] * d;
    const float* g = grads + i * d;
    for (size_t j = 0; j < d; ++j) sum[j] += g[j];
  }
}

}  // namespace pstrain
