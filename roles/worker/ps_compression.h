// PsCompression: a worker's threshold encoders for its pushes of PS dense
// tensors (optim/threshold_codec.h does the encoding).
//
// Every tensor whose CompressionFor(config, name) is threshold gets one
// ThresholdEncoder per partition of the PartitionMap, so that each server
// receives (and checks) one self-contained message per partition, exactly
// as it would receive that partition's dense floats. The residual of every
// encoder stays here, on the worker: the servers see only +-tau at the
// elements sent. Embedding tables never come here.
//
// Momentum correction (optim/momentum_correction.h): for a tensor that is
// MomentumCorrected, the worker's momentum u is what gets encoded (its
// buffer kept here, over the whole tensor), and the server applies sgd
// (CorrectedOptimizerFor) to the mean of the decoded messages. Weight decay
// stays on the server, so it acts on the weights directly instead of
// through the momentum (about 1 - m as strong as with server momentum).
//
// Checkpoints keep the residuals, thresholds and momentum buffers, each
// worker its own (roles/worker/ps_state.h).
//
// Threads: used by the training thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/ps/partition_map.h"
#include "optim/momentum_correction.h"
#include "optim/threshold_codec.h"
#include "src/common/checkpoint_file.h"
#include "src/common/config/config.h"

namespace pstrain {

class PsCompression {
 public:
  // `encode` false: every push goes dense and is only counted (mode
  // average pushes weight deltas, which are not encoded).
  PsCompression(const Config& config, const PartitionMap& map, bool encode = true);

  // No PS tensor is compressed.
  bool empty() const { return compressed_ == 0; }
  bool Compresses(int tensor) const { return !tensors_[tensor].encoders.empty(); }

  // Encodes `gradient` (the whole tensor `tensor`, which Compresses): one
  // message per partition, valid and unchanged until the next Encode of
  // this tensor. A momentum-corrected tensor encodes its momentum (above).
  const std::vector<std::vector<uint8_t>>* Encode(int tensor, const float* gradient);
  // The worker's momentum buffer u of `tensor` (its elements), or null when
  // the tensor is not momentum-corrected.
  const float* momentum(int tensor) const;
  // The epoch (0-based) the next Encodes are in, for the encoders' warm-up
  // (ThresholdEncoder::SetEpoch).
  void SetEpoch(int64_t epoch);
  // Counts one push of `tensor`, compressed or not, for the logs.
  void CountPush(int tensor);

  // Checkpoints (roles/worker/ps_state.h): every encoder's state, as section
  // "encoder/<tensor>/<partition>" (ThresholdEncoder::PackState), and every
  // momentum buffer, as "momentum/<tensor>".
  std::vector<Section> State() const;
  // Restores what State() gave, read back from a file: each section this
  // worker's tensors need must be there with its exact size and valid
  // values, all checked before anything changes.
  Status Restore(const SectionsByName& sections);

  // Cumulative totals over the encoders' messages; min_tau..max_tau is the
  // range of the encoders' current thresholds (what the next step uses).
  CompressionCounters counters() const;
  // Bytes the pushes sent (messages, and dense floats of tensors not
  // compressed), and what they would have sent all dense.
  int64_t pushed_bytes() const { return pushed_bytes_; }
  int64_t dense_bytes() const { return dense_bytes_; }

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> offsets;                             // of each partition, in elements
    std::vector<std::unique_ptr<ThresholdEncoder>> encoders;  // per partition; empty: dense
    std::vector<std::vector<uint8_t>> messages;               // per partition
    // Momentum correction (empty momentum: off): u over the whole tensor,
    // and for nesterov the g + m * u that is encoded.
    std::vector<float> momentum, nesterov_input;
    float m = 0;
    int64_t elements = 0;
    int64_t last_bytes = 0;  // of the last Encode
  };

  std::vector<Tensor> tensors_;
  // MaskSent's decoded message: all zeros between calls.
  std::vector<float> sent_scratch_;
  int compressed_ = 0;
  CompressionCounters counters_;
  int64_t pushed_bytes_ = 0, dense_bytes_ = 0;
};

}  // namespace pstrain
