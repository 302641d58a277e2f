// PrefetchingBatcher: a Batcher run on a reader thread, so the next batches
// are ready while the caller trains on the current one. It yields exactly the
// batches the wrapped Batcher would, in the same order.
//
// Threads: the reader thread owns the Batcher from construction on; the
// caller's thread (one at a time) calls StartEpoch/Next. They share only the
// queue and the epoch request, under mutex_. Destroying it mid-epoch stops
// the reader after the batch it is building (no hang, nothing left behind).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>

#include "src/common/mutex.h"
#include "src/data/batcher.h"

namespace pstrain {

class PrefetchingBatcher {
 public:
  // Configure `batcher` fully (CapStepsPerEpoch) before handing it over.
  // `depth`: batches prepared ahead (>= 1).
  explicit PrefetchingBatcher(Batcher batcher, int depth = 3);
  ~PrefetchingBatcher();
  PrefetchingBatcher(const PrefetchingBatcher&) = delete;
  PrefetchingBatcher& operator=(const PrefetchingBatcher&) = delete;

  // Begins epoch `epoch` at batch `position` (Batcher::StartEpoch), dropping
  // what is left of the previous one. The reader keeps no state of its own
  // beyond (epoch, position): that pair is all a checkpoint needs.
  // `rest`: see Batcher::StartEpoch (a re-sharded resume or live change).
  void StartEpoch(int epoch, int64_t position = 0, EpochRest rest = {});
  // Blocks until the next batch is ready; false at the epoch's end, or
  // when the reader failed (status() then says why).
  bool Next(Batch* out);
  // Not OK once the reader could not build a batch (its memory could not
  // be allocated); every Next() after that returns false.
  Status status();
  int64_t StepsPerEpoch() const { return steps_per_epoch_; }
  int64_t Samples() const { return samples_; }

 private:
  void Run();  // the reader thread

  Batcher batcher_;  // reader thread only
  const int depth_;
  const int64_t steps_per_epoch_;
  const int64_t samples_;

  Mutex mutex_;
  CondVar changed_;  // any field below changed
  // Bumped by each StartEpoch; the reader drops batches of older ones.
  uint64_t generation_ GUARDED_BY(mutex_) = 0;
  int epoch_ GUARDED_BY(mutex_) = 0;
  int64_t position_ GUARDED_BY(mutex_) = 0;
  EpochRest rest_ GUARDED_BY(mutex_);
  std::deque<Batch> queue_ GUARDED_BY(mutex_);  // this generation's batches
  bool epoch_done_ GUARDED_BY(mutex_) = true;   // no more batches will come
  bool stopping_ GUARDED_BY(mutex_) = false;
  Status failure_ GUARDED_BY(mutex_);  // the reader stopped on it
  std::thread reader_;
};

}  // namespace pstrain
