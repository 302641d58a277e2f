// NormClip: a worker's part of clipping by the global norm (train.clip_norm,
// sync mode), the norm PyTorch's clip_grad_norm_ takes in one process:
// the L2 norm of a step's mean gradient over every trained parameter,
// wherever it lives.
//
// Each step:
//  1. the worker pushes its gradients and asks every partition of every PS
//     tensor for its share of the squared norm (NormRequests): the server
//     holds the step once every worker's gradient is in, instead of
//     applying it, and answers with the square of its mean
//     (roles/server/update_core.h);
//  2. the server-held tables' rows of the step are asked the same way
//     (SparseClient::Norms: each server holds its share of the rows), and
//     the all-reduced weights' averaged gradients, the same on every
//     worker, add their squares (AllReducedWeights::SquaredGradNorm);
//  3. Decide takes the sum's root and the factor min(1, clip_norm / norm);
//     the worker scales its all-reduced gradients by it and sends it to
//     every partition (FactorRequests) and every server's part of each
//     table (SparseClient::Clip), which apply the held step times it; the
//     pulls of the step wait for that, as before.
// Every worker adds the same shares in the same order, so every worker and
// every partition uses one factor, bit for bit; a server refuses a second,
// different factor for a step. The cost: the pulls go a round trip later
// (after the norm's, and after the all-reduce, which they overlapped
// before), and a table costs two more small calls a step.
// Threads: the worker's training thread; the shares are written by the
// KvClient's loop until the requests' handle completes.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/ps/kv_client.h"
#include "src/common/status.h"

namespace pstrain {

class NormClip {
 public:
  explicit NormClip(float clip_norm) : clip_norm_(clip_norm) {}

  // One norm request of step `step` per tensor of `map`; the answers land
  // here and must not move until the handle completes.
  std::vector<KvOp> NormRequests(const PartitionMap& map, int64_t step);
  // Once those answered: the global norm, with `local_squares` from the
  // all-reduced gradients and `table_shares` (the server-held tables',
  // SparseClient::Norms), and its factor. Refused when the norm is not
  // finite (a diverged step).
  Status Decide(double local_squares, int64_t step, const std::vector<double>& table_shares = {});
  // Step `step`'s factor to every partition of the first `tensors` tensors.
  std::vector<KvOp> FactorRequests(int tensors, int64_t step);

  double norm() const { return norm_; }     // the last step's global norm
  float factor() const { return factor_; }  // min(1, clip_norm / norm)
  bool clipped() const { return factor_ < 1.0f; }

 private:
  const float clip_norm_;
  std::vector<std::vector<double>> shares_;  // per tensor, per partition
  double norm_ = 0;
  float factor_ = 1.0f;
};

}  // namespace pstrain
