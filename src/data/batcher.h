// Batcher: cuts a Dataset into the batches one worker trains on, epoch by
// epoch. Not thread-safe; PrefetchingBatcher runs one on a reader thread.
//
// Every epoch visits the samples in a permutation seeded by (seed, epoch),
// the same on every worker (random.h: no implementation-defined shuffles).
//
// Split by index (every worker holds the whole dataset): worker r's batch at
// step k is the samples at permutation positions [(k*W + r)*B, (k*W + r+1)*B)
// for W workers and batch size B. So W workers with batch B together see, in
// order, what one worker with batch W*B sees (worker 0 gets the first B of
// each W*B). The incomplete last global batch is dropped: every worker takes
// the same number of steps, N / (W*B).
//
// With keep_tail (elastic jobs, whose worker count changes within an
// epoch), nothing is dropped: the last step of an epoch also takes the
// samples that make no whole global batch, split among the workers as evenly
// as they go (a worker's last batch holds B + t/W samples, one more for the
// first t % W ranks), and an epoch's rest smaller than a global batch (but
// at least W samples) is one step. Only fewer than W samples left at an
// epoch's end are dropped.
//
// Sharded by file (Dataset::sharded_by_file): each worker batches its own
// samples, N_r / B steps. A worker cannot know the others' N_r, so the caller
// agrees on the step count (e.g. the minimum of Samples() / B over workers,
// exchanged through the scheduler) and applies it with CapStepsPerEpoch().
#pragma once

#include <cstdint>
#include <vector>

#include "src/common/batch.h"
#include "src/common/epoch_rest.h"
#include "src/data/dataset.h"

namespace pstrain {

class Batcher {
 public:
  // `data` must outlive the Batcher. keep_last: also yield the final,
  // smaller batch (evaluation); only for a Batcher that does not split among
  // several workers.
  Batcher(const Dataset* data, int batch_size, int rank, int workers, bool split_by_index,
          uint64_t seed, bool shuffle, bool keep_last = false, bool keep_tail = false);

  // Training on what LoadTrainShard returned: splits by index unless the
  // dataset is already this worker's shard files.
  static Batcher ForTraining(const Dataset* data, int batch_size, int rank, int workers,
                             uint64_t seed, bool shuffle, bool keep_tail = false);
  // The steps of an epoch of which `remaining` samples are left to `workers`
  // workers of batch `batch_size` (see keep_tail above).
  static int64_t StepsFor(int64_t remaining, int batch_size, int workers, bool keep_tail);
  // Evaluation: every sample once, in file order, the last batch kept.
  static Batcher ForEval(const Dataset* data, int batch_size);

  // Begins epoch `epoch` (0-based) at its batch `position` (a resumed run:
  // the batches before it are skipped, not read); Next() yields nothing
  // before the first StartEpoch. `skip_samples` > 0 (a run resumed with
  // another worker count): the first that many permutation positions were
  // trained already; the epoch's batches are cut from the rest, as if the
  // permutation began after them, (N - skip_samples) / (W * B) of them.
  // `rest` (src/common/epoch_rest.h) also names positions below its skip
  // to train first: the batches are cut from them, then the rest.
  void StartEpoch(int epoch, int64_t position = 0, int64_t skip_samples = 0) {
    StartEpoch(epoch, position, EpochRest{{}, skip_samples});
  }
  void StartEpoch(int epoch, int64_t position, const EpochRest& rest);
  // The next batch of the epoch into `out` (reusing its storage); false at
  // the epoch's end.
  bool Next(Batch* out);

  int64_t StepsPerEpoch() const;
  // The samples this Batcher draws from (the whole dataset when splitting).
  int64_t Samples() const { return data_->size(); }
  // Ends every epoch after at most `steps` batches (see the header comment).
  void CapStepsPerEpoch(int64_t steps) { cap_ = steps; }
  int batch_size() const { return batch_size_; }
  // Every batch then lists its samples' indices (Batch::sample_ids).
  void RecordSampleIds(bool on) { record_ids_ = on; }

 private:
  void Gather(int64_t begin, int64_t end, Batch* out) const;

  const Dataset* data_;
  int batch_size_;
  int rank_;
  int workers_;  // 1 unless splitting by index
  uint64_t seed_;
  bool shuffle_;
  bool keep_last_;
  bool keep_tail_;
  bool record_ids_ = false;
  int64_t cap_ = -1;  // -1: no cap
  // This epoch's permutation of sample indices; with a rest to make up,
  // what is left of it in the order it is trained.
  std::vector<int64_t> order_;
  int64_t step_ = 0;
  int64_t skip_ = 0;   // order_'s positions already trained
  bool whole_ = true;  // order_ is the whole permutation, skip_ 0
  bool started_ = false;
};

}  // namespace pstrain
