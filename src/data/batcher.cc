#include "src/data/batcher.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <numeric>

#include "src/common/random.h"

namespace pstrain {

Batcher::Batcher(const Dataset* data, int batch_size, int rank, int workers, bool split_by_index,
                 uint64_t seed, bool shuffle, bool keep_last, bool keep_tail)
    : data_(data),
      batch_size_(batch_size),
      rank_(split_by_index ? rank : 0),
      workers_(split_by_index ? workers : 1),
      seed_(seed),
      shuffle_(shuffle),
      keep_last_(keep_last),
      keep_tail_(keep_tail && split_by_index) {
  assert(data != nullptr && batch_size > 0);
  assert(workers > 0 && rank >= 0 && rank < workers);
  assert(!keep_last || workers_ == 1);
}

Batcher Batcher::ForTraining(const Dataset* data, int batch_size, int rank, int workers,
                             uint64_t seed, bool shuffle, bool keep_tail) {
  return Batcher(data, batch_size, rank, workers, !data->sharded_by_file, seed, shuffle,
                 /*keep_last=*/false, keep_tail);
}

int64_t Batcher::StepsFor(int64_t remaining, int batch_size, int workers, bool keep_tail) {
  const int64_t steps = remaining / (int64_t{batch_size} * workers);
  return keep_tail && steps == 0 && remaining >= workers ? 1 : steps;
}

Batcher Batcher::ForEval(const Dataset* data, int batch_size) {
  return Batcher(data, batch_size, 0, 1, /*split_by_index=*/false, /*seed=*/0, /*shuffle=*/false,
                 /*keep_last=*/true);
}

int64_t Batcher::StepsPerEpoch() const {
  const int64_t global = int64_t{batch_size_} * workers_;
  const int64_t n = data_->size();
  const int64_t steps =
      keep_last_ ? (n + global - 1) / global : StepsFor(n, batch_size_, workers_, keep_tail_);
  return cap_ >= 0 ? std::min(steps, cap_) : steps;
}

void Batcher::StartEpoch(int epoch, int64_t position, const EpochRest& rest) {
  order_.resize(static_cast<size_t>(data_->size()));
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (shuffle_) {
    Rng rng(StreamSeed(seed_, static_cast<uint64_t>(epoch)));
    Shuffle(&order_, &rng);
  }
  // The epoch's order is a function of (seed, epoch) alone: a resumed run
  // skips to its position without reading the batches before it.
  step_ = std::max<int64_t>(position, 0);
  skip_ = std::clamp<int64_t>(rest.skip, 0, data_->size());
  whole_ = skip_ == 0 && rest.make_up.empty();
  if (!rest.make_up.empty()) {
    // The positions to make up first, then the rest: checked where they
    // were read (EpochRest::Check), clamped here all the same, and never
    // more than the epoch's samples.
    const int64_t n = data_->size();
    std::vector<int64_t> left;
    left.reserve(static_cast<size_t>(n));
    auto take = [&](int64_t begin, int64_t end) {
      begin = std::clamp<int64_t>(begin, 0, n);
      end = std::clamp<int64_t>(end, begin, begin + n - static_cast<int64_t>(left.size()));
      end = std::min(end, n);
      left.insert(left.end(), order_.begin() + begin, order_.begin() + end);
    };
    for (const PositionRange& r : rest.make_up) take(r.begin, r.end);
    take(skip_, n);
    order_.swap(left);
    skip_ = 0;
  }
  started_ = true;
}

bool Batcher::Next(Batch* out) {
  if (!started_) return false;
  const int64_t size = static_cast<int64_t>(order_.size());
  const int64_t remaining = size - skip_;
  const int64_t steps =
      whole_ ? StepsPerEpoch() : StepsFor(remaining, batch_size_, workers_, keep_tail_);
  if (step_ >= steps) return false;
  const int64_t global = int64_t{batch_size_} * workers_;
  int64_t begin = skip_ + (step_ * workers_ + rank_) * batch_size_;
  int64_t end = std::min<int64_t>(begin + batch_size_, size);
  if (keep_tail_ && step_ + 1 == steps && cap_ < 0) {
    // The epoch's last step: what is left, split as evenly as it goes.
    const int64_t base = skip_ + step_ * global;
    const int64_t left = size - base;
    const int64_t each = left / workers_, extra = left % workers_;
    begin = base + rank_ * each + std::min<int64_t>(rank_, extra);
    end = begin + each + (rank_ < extra ? 1 : 0);
  }
  Gather(begin, end, out);
  ++step_;
  return true;
}

// Copies the samples at permutation positions [begin, end) into `out`.
void Batcher::Gather(int64_t begin, int64_t end, Batch* out) const {
  const int64_t n = end - begin;
  const int64_t width = data_->dense_per_sample();
  const int fields = data_->fields;
  Shape shape = {n};
  shape.insert(shape.end(), data_->sample_shape.begin(), data_->sample_shape.end());
  out->dense.Resize(std::move(shape));
  out->fields = fields;
  out->sparse.resize(static_cast<size_t>(n * fields));
  const bool weighted = !data_->weights.empty();
  out->sparse_weights.resize(weighted ? static_cast<size_t>(n * fields) : 0);
  out->labels.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = order_[static_cast<size_t>(begin + i)];
    std::memcpy(out->dense.ptr() + i * width, data_->dense.data() + s * width,
                sizeof(float) * static_cast<size_t>(width));
    if (fields > 0) {
      std::memcpy(out->sparse.data() + i * fields, data_->sparse.data() + s * fields,
                  sizeof(int64_t) * static_cast<size_t>(fields));
      if (weighted) {
        std::memcpy(out->sparse_weights.data() + i * fields, data_->weights.data() + s * fields,
                    sizeof(float) * static_cast<size_t>(fields));
      }
    }
    out->labels[static_cast<size_t>(i)] = data_->labels[static_cast<size_t>(s)];
  }
  out->sample_ids.clear();
  if (record_ids_) out->sample_ids.assign(order_.begin() + begin, order_.begin() + end);
}

}  // namespace pstrain
