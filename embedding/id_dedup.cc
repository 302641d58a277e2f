#include "embedding/id_dedup.h"

#include <algorithm>
#include <cassert>

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
