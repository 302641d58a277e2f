#include "roles/worker/norm_clip.h"

#include <fmt/format.h>

#include <cmath>

namespace pstrain {

std::vector<KvOp> NormClip::NormRequests(const PartitionMap& map, int64_t step) {
  const size_t tensors = map.tensors().size();
  shares_.resize(tensors);
  std::vector<KvOp> ops;
  ops.reserve(tensors);
  for (size_t t = 0; t < tensors; ++t) {
    shares_[t].assign(map.partitions(static_cast<int>(t)).size(), -1.0);
    KvOp op{KvOp::Kind::kNorm, static_cast<int>(t), nullptr, step};
    op.norms = shares_[t].data();
    ops.push_back(op);
  }
  return ops;
}

Status NormClip::Decide(double local_squares, int64_t step,
                        const std::vector<double>& table_shares) {
  // The clients refused a negative share; a NaN or infinite one is a
  // diverged gradient somewhere, which the sum carries.
  double squares = local_squares;
  for (const std::vector<double>& tensor : shares_)
    for (double share : tensor) squares += share;
  for (double share : table_shares) squares += share;
  norm_ = std::sqrt(squares);
  if (!std::isfinite(norm_))
    return FailedPrecondition(
        fmt::format("the gradient's global norm is {} at step {}: training diverged (lower "
                    "train.optimizer.lr?)",
                    norm_, step + 1));
  factor_ = norm_ > clip_norm_ ? static_cast<float>(clip_norm_ / norm_) : 1.0f;
  if (!(factor_ > 0))
    return FailedPrecondition(fmt::format(
        "the gradient's global norm is {} at step {}, too large to clip to {}: training "
        "diverged (lower train.optimizer.lr?)",
        norm_, step + 1, clip_norm_));
  return Status::OK();
}

std::vector<KvOp> NormClip::FactorRequests(int tensors, int64_t step) {
  std::vector<KvOp> ops;
  ops.reserve(static_cast<size_t>(tensors));
  for (int t = 0; t < tensors; ++t) ops.push_back({KvOp::Kind::kClipScale, t, &factor_, step});
  return ops;
}

}  // namespace pstrain
