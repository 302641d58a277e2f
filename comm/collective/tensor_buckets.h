// TensorBuckets: many tensors all-reduced (or broadcast) as a few large ones,
// so that a model's small gradients (biases, small layers) do not each pay a
// trip around the ring.
//
// Tensors are taken in order and packed into buckets of up to bucket_bytes;
// a bucket of one tensor is reduced in place, a bucket of several is copied
// into its own staging buffer (allocated once, here) and back. The layout is
// a pure function of the tensor sizes, so every rank packs the same buckets.
//
// Ownership: the tensors are borrowed and must outlive this object.
// Threads: like Collective, one call at a time, never on a loop thread.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/collective/collective.h"

namespace pstrain {

struct TensorView {
  float* data;
  int64_t n;
};

class TensorBuckets {
 public:
  TensorBuckets(std::vector<TensorView> tensors, int64_t bucket_bytes);

  Status AllReduce(Collective& collective, ReduceOp op);
  Status Broadcast(Collective& collective, int root);

  int buckets() const { return static_cast<int>(buckets_.size()); }

 private:
  struct Bucket {
    size_t first = 0, count = 0;  // tensors_[first, first + count)
    std::vector<float> staging;   // empty when count == 1
  };
  template <typename Run>
  Status ForEachBucket(Run run);

  std::vector<TensorView> tensors_;
  std::vector<Bucket> buckets_;
};

}  // namespace pstrain
