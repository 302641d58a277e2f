#include "comm/collective.h"

#include <fmt/format.h>

namespace pstrain {

Status Collective::AllReduce(float* data, int64_t n, ReduceOp op) {
  if (world() == 1 || n == 0) return Status::OK();
  PSTRAIN_RETURN_IF_ERROR(SumInPlace(data, n));
  if (op == ReduceOp::kAverage) {
    const float scale = 1.0f / static_cast<float>(world());
    for (int64_t i = 0; i < n; ++i) data[i] *= scale;
  }
  return Status::OK();
}

Status Collective::Broadcast(float* data, int64_t n, int root) {
  if (root < 0 || root >= world())
    return InvalidArgument(fmt::format("broadcast from rank {} in a ring of {}", root, world()));
  if (world() == 1 || n == 0) return Status::OK();
  return BroadcastInPlace(data, n, root);
}

Status Collective::Barrier() {
  float token = 0;
  return AllReduce(&token, 1, ReduceOp::kSum);
}

}  // namespace pstrain
