#include "comm/collective/tensor_buckets.h"

#include <algorithm>
#include <cstring>

namespace pstrain {

TensorBuckets::TensorBuckets(std::vector<TensorView> tensors, int64_t bucket_bytes)
    : tensors_(std::move(tensors)) {
  const int64_t capacity = std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));
  int64_t filled = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (buckets_.empty() || filled + tensors_[i].n > capacity) {
      buckets_.push_back(Bucket{i, 0, {}});
      filled = 0;
    }
    ++buckets_.back().count;
    filled += tensors_[i].n;
  }
  for (Bucket& b : buckets_) {
    if (b.count == 1) continue;
    int64_t n = 0;
    for (size_t i = b.first; i < b.first + b.count; ++i) n += tensors_[i].n;
    b.staging.resize(static_cast<size_t>(n));
  }
}

// run(data, n) once per bucket: in place for a bucket of one tensor, else on
// the staging buffer, packed before and unpacked after.
template <typename Run>
Status TensorBuckets::ForEachBucket(Run run) {
  for (Bucket& b : buckets_) {
    if (b.count == 1) {
      PSTRAIN_RETURN_IF_ERROR(run(tensors_[b.first].data, tensors_[b.first].n));
      continue;
    }
    float* at = b.staging.data();
    for (size_t i = b.first; i < b.first + b.count; ++i) {
      std::memcpy(at, tensors_[i].data, static_cast<size_t>(tensors_[i].n) * sizeof(float));
      at += tensors_[i].n;
    }
    PSTRAIN_RETURN_IF_ERROR(run(b.staging.data(), static_cast<int64_t>(b.staging.size())));
    at = b.staging.data();
    for (size_t i = b.first; i < b.first + b.count; ++i) {
      std::memcpy(tensors_[i].data, at, static_cast<size_t>(tensors_[i].n) * sizeof(float));
      at += tensors_[i].n;
    }
  }
  return Status::OK();
}

Status TensorBuckets::AllReduce(Collective& collective, ReduceOp op) {
  return ForEachBucket([&](float* data, int64_t n) { return collective.AllReduce(data, n, op); });
}

Status TensorBuckets::Broadcast(Collective& collective, int root) {
  return ForEachBucket([&](float* data, int64_t n) { return collective.Broadcast(data, n, root); });
}

}  // namespace pstrain
