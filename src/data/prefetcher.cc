#include "src/data/prefetcher.h"

#include <fmt/format.h>

#include <cassert>
#include <new>
#include <utility>

namespace pstrain {

PrefetchingBatcher::PrefetchingBatcher(Batcher batcher, int depth)
    : batcher_(std::move(batcher)),
      depth_(depth),
      steps_per_epoch_(batcher_.StepsPerEpoch()),
      samples_(batcher_.Samples()) {
  assert(depth >= 1);
  reader_ = std::thread([this] { Run(); });
}

PrefetchingBatcher::~PrefetchingBatcher() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  changed_.NotifyAll();
  reader_.join();
}

void PrefetchingBatcher::StartEpoch(int epoch, int64_t position, EpochRest rest) {
  {
    MutexLock lock(&mutex_);
    ++generation_;
    epoch_ = epoch;
    position_ = position;
    rest_ = std::move(rest);
    queue_.clear();
    epoch_done_ = false;
  }
  changed_.NotifyAll();
}

bool PrefetchingBatcher::Next(Batch* out) {
  MutexLock lock(&mutex_);
  changed_.Wait(&lock, [this]() REQUIRES(mutex_) {
    return !queue_.empty() || epoch_done_ || !failure_.ok();
  });
  if (queue_.empty() || !failure_.ok()) return false;
  *out = std::move(queue_.front());
  queue_.pop_front();
  lock.Unlock();
  changed_.NotifyAll();  // room for the reader
  return true;
}

Status PrefetchingBatcher::status() {
  MutexLock lock(&mutex_);
  return failure_;
}

void PrefetchingBatcher::Run() {
  uint64_t served = 0;  // the generation the reader last started
  MutexLock lock(&mutex_);
  for (;;) {
    changed_.Wait(&lock, [&]() REQUIRES(mutex_) { return stopping_ || generation_ != served; });
    if (stopping_) return;
    served = generation_;
    const int epoch = epoch_;
    const int64_t position = position_;
    const EpochRest rest = rest_;
    lock.Unlock();
    batcher_.StartEpoch(epoch, position, rest);
    for (;;) {
      Batch batch;
      bool more = false;
      try {
        more = batcher_.Next(&batch);  // the slow part, unlocked
      } catch (const std::bad_alloc&) {
        // The batch's size comes from the config and the data: an error for
        // the trainer to report, not an exception that ends the process.
        lock.Lock();
        failure_ = Unavailable(fmt::format(
            "not enough memory for a batch of {} samples (std::bad_alloc)", batcher_.batch_size()));
        changed_.NotifyAll();
        changed_.Wait(&lock, [&]() REQUIRES(mutex_) { return stopping_; });
        return;
      }
      lock.Lock();
      if (more) {
        changed_.Wait(&lock, [&]() REQUIRES(mutex_) {
          return stopping_ || generation_ != served || static_cast<int>(queue_.size()) < depth_;
        });
      }
      if (stopping_ || generation_ != served) break;  // relock held: outer loop waits
      if (!more) {
        epoch_done_ = true;
        changed_.NotifyAll();
        break;
      }
      queue_.push_back(std::move(batch));
      changed_.NotifyAll();
      lock.Unlock();
    }
  }
}

}  // namespace pstrain
