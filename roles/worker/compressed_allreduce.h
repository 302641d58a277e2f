// CompressedAllReduce: the gradients of some all-reduced (ps: false) weights
// averaged among the workers by threshold encoding (optim/threshold_codec.h)
// instead of a dense all-reduce, as Deeplearning4j shares updates with the
// whole network (Strom 2015).
//
// Each step, on every worker:
//   1. each tensor's gradient goes into its own encoder (one per tensor and
//      worker; the residual keeps what is not sent yet), and the messages
//      are packed, in tensor order, as (u32 little-endian size, message);
//   2. the packed messages of all workers are all-gathered
//      (Collective::AllGatherBytes): every worker receives the same bytes;
//   3. each gradient buffer is zeroed and every worker's message is added
//      into it with scale 1/W, workers in rank order, tensors in order.
// The gradient then holds the average of what the workers sent, as the
// dense path's average (so the same lr works), and since every worker adds
// the same floats in the same order, every copy gets the same bits.
//
// Momentum correction (optim/momentum_correction.h): a tensor added with a
// momentum factor encodes this worker's momentum u instead of its gradient,
// and the caller applies sgd, not momentum, to the average. u is per worker
// (part of the encoders' state); the average every worker applies is still
// the same bits.
//
// A peer's bytes are checked before use: a bad message is an error naming
// the worker and the tensor, on every worker alike (they all hold the same
// bytes), never a crash.
//
// Ownership: the Params belong to the model and must outlive this object.
// Threads: the worker's training thread only.
#pragma once

#include <memory>
#include <vector>

#include "comm/collective/collective.h"
#include "optim/momentum_correction.h"
#include "optim/threshold_codec.h"
#include "src/nn/layer.h"

namespace pstrain {

class CompressedAllReduce {
 public:
  // Adds `param`, encoded as `config` says (config.type is kThreshold).
  // `momentum_corrected`: encode the momentum u of factor `m` (above).
  void Add(Param* param, const CompressionConfig& config, bool momentum_corrected = false,
           float m = 0, bool nesterov = false);
  bool empty() const { return tensors_.empty(); }
  // The epoch (0-based) the next Exchanges are in, for the encoders' warm-up
  // (ThresholdEncoder::SetEpoch).
  void SetEpoch(int64_t epoch);

  // Steps 1-3 above: every tensor's grad becomes the workers' average.
  Status Exchange(Collective& collective);

  // This worker's encoders, totalled over every message so far.
  const CompressionCounters& counters() const { return counters_; }
  // Each encoder's tau for the next message, in the order added.
  std::vector<float> thresholds() const;
  // This worker's momentum u of the `index`th tensor added, or null when it
  // is not momentum-corrected.
  const float* momentum(size_t index) const;
  // Checkpoints: this worker's encoders (each tensor's tau, message count,
  // residual and, when momentum-corrected, u), as bytes of exactly StateBytes(); Unpack checks them
  // (they come from a file and the chief) before restoring anything.
  std::vector<uint8_t> PackState() const;
  Status UnpackState(const std::vector<uint8_t>& bytes);
  uint64_t StateBytes() const;
  // The largest packed message a worker may send (what a peer may make
  // this worker take).
  uint64_t MaxPackedBytes() const;

 private:
  struct Tensor {
    Param* param;
    std::unique_ptr<ThresholdEncoder> encoder;
    // Momentum correction (empty momentum: off): u, and for nesterov the
    // g + m * u that is encoded.
    std::vector<float> momentum, nesterov_input;
    float m = 0;
  };
  Status DecodeFrom(int rank, const std::vector<uint8_t>& packed, float scale);

  std::vector<Tensor> tensors_;
  CompressionCounters counters_;
  std::vector<uint8_t> message_, packed_;  // reused every step
  std::vector<float> sent_scratch_;        // MaskSent's decoding: zeros between calls
  std::vector<std::vector<uint8_t>> gathered_;
};

}  // namespace pstrain
