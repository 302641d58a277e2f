// Collective: operations that every worker of a job calls together, in the
// same order, on float tensors: all-reduce (sum or average), broadcast from
// one rank, and a barrier; and, built on those two alone, an all-gather of
// byte strings of any sizes (sparse messages). Backends: the CPU ring (ring_collective.h) over
// the libuv transport; NCCL for device memory lives in src/gpu.
//
// Threads: each call blocks its caller until this rank's part is done (never
// call from an event-loop thread); one call at a time per communicator.
// Errors: a rank that is lost fails every rank's call with a Status naming
// it, and every later call fails the same way (nothing hangs).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "src/common/status.h"

namespace pstrain {

enum class ReduceOp { kSum, kAverage };

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // data[0..n) becomes the sum (or the mean) of every rank's data[0..n).
  Status AllReduce(float* data, int64_t n, ReduceOp op);
  // data[0..n) on every rank becomes root's data[0..n).
  Status Broadcast(float* data, int64_t n, int root);
  // Returns once every rank has called Barrier() (a sum of one float).
  Status Barrier();
  // (*all)[r] becomes rank r's `mine`, on every rank. Sizes may differ
  // between ranks. A rank whose bytes exceed `max_bytes` (at most 2^32 - 1)
  // fails every rank's call with an error naming it, and so does a size
  // that did not arrive intact: what a peer sends is checked before any
  // memory is taken for it.
  Status AllGatherBytes(const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all,
                        uint64_t max_bytes = std::numeric_limits<uint32_t>::max());

 protected:
  // What a backend does: the sum in place, and root's copy to all (root is
  // checked). Never called with world() == 1 or n == 0.
  virtual Status SumInPlace(float* data, int64_t n) = 0;
  virtual Status BroadcastInPlace(float* data, int64_t n, int root) = 0;
};

}  // namespace pstrain
