#include "embedding/row_cache.h"

#include <cassert>
#include <cstring>

namespace pstrain {

RowCache::RowCache(size_t capacity, int dim)
    : capacity_(capacity),
      dim_(static_cast<size_t>(dim)),
      entries_(capacity),
      values_(capacity * static_cast<size_t>(dim)),
      sketch_(capacity) {
  assert(dim > 0 && capacity < kNone);
  index_.Reserve(capacity);
  Clear();
}

const float* RowCache::Get(int64_t id, int64_t step, int64_t max_staleness) {
  sketch_.Increment(id);
  const uint32_t* slot = index_.Find(id);
  if (slot == nullptr) {
    ++stats_.misses;
    return nullptr;
  }
  if (step - entries_[*slot].step > max_staleness) {
    ++stats_.misses;
    ++stats_.stale_misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.MoveToFront(entries_, *slot);
  return Row(*slot);
}

bool RowCache::Has(int64_t id, int64_t step, int64_t max_staleness) const {
  const uint32_t* slot = index_.Find(id);
  return slot != nullptr && step - entries_[*slot].step <= max_staleness;
}

bool RowCache::Put(int64_t id, const float* row, int64_t step) {
  if (capacity_ == 0) return false;
  uint32_t slot;
  if (const uint32_t* found = index_.Find(id)) {
    slot = *found;
    lru_.Unlink(entries_, slot);
  } else if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
    index_.Insert(id, slot);
  } else {
    // TinyLFU admission: keep the victim unless the newcomer is more popular.
    if (sketch_.Estimate(id) <= sketch_.Estimate(entries_[lru_.back()].id)) {
      ++stats_.rejections;
      return false;
    }
    slot = lru_.back();
    lru_.Unlink(entries_, slot);
    index_.Erase(entries_[slot].id);
    index_.Insert(id, slot);
    ++stats_.evictions;
  }
  entries_[slot].id = id;
  entries_[slot].step = step;
  std::memcpy(Row(slot), row, dim_ * sizeof(float));
  lru_.PushFront(entries_, slot);
  return true;
}

void RowCache::Invalidate(int64_t id) {
  const uint32_t* found = index_.Find(id);
  if (found == nullptr) return;
  const uint32_t slot = *found;
  lru_.Unlink(entries_, slot);
  index_.Erase(id);
  free_.push_back(slot);
}

void RowCache::Clear() {
  index_.Clear();
  lru_.Clear();
  free_.clear();
  for (size_t slot = capacity_; slot > 0; --slot) free_.push_back(static_cast<uint32_t>(slot - 1));
}

}  // namespace pstrain
