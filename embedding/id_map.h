// FlatIdMap<V>: a hash map from an int64 id to a small value (a row index, a
// sighting count), used by the server tables, the worker's deduplication and
// the row cache. Open addressing with linear probing over one flat array of
// {key, value} slots, Mix64 as the hash, at most half full.
//
// Why not std::unordered_map: it allocates one node per entry (a server
// creates millions of rows) and every lookup chases a pointer into that node.
// Here a lookup is one hash and, at load <= 1/2, usually one cache line; the
// array grows by doubling, so memory is allocated O(log n) times, never per
// entry. Erase shifts the following entries back instead of leaving
// tombstones, so eviction churn never lengthens probes.
//
// Any int64 is a valid key: the one value reserved to mark empty slots
// (INT64_MIN) is kept apart in its own field.
// Ownership: the map owns its slots. Value pointers returned by Find/Insert
// stay valid until the next Insert, Erase, Reserve or Clear.
// Thread-safety: none; one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "src/common/prefetch.h"
#include "src/common/random.h"
#include "src/common/tensor_memory.h"

namespace pstrain {

template <typename V>
class FlatIdMap {
 public:
  FlatIdMap() { Rehash(kMinCapacity); }

  size_t size() const { return size_ + (has_empty_key_ ? 1 : 0); }
  bool empty() const { return size() == 0; }

  V* Find(int64_t key) {
    if (key == kEmpty) return has_empty_key_ ? &empty_key_value_ : nullptr;
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }
  const V* Find(int64_t key) const { return const_cast<FlatIdMap*>(this)->Find(key); }

  // Starts loading the cache line a Find(key) will read first, so a loop
  // over many keys can overlap their memory latencies (see SparseTable).
  void Prefetch(int64_t key) const { PrefetchForRead(&slots_[Home(key)]); }

  // Inserts {key, value} unless key is present. Returns the stored value and
  // whether it was inserted.
  std::pair<V*, bool> Insert(int64_t key, V value) {
    if (key == kEmpty) {
      const bool inserted = !has_empty_key_;
      if (inserted) empty_key_value_ = value;
      has_empty_key_ = true;
      return {&empty_key_value_, inserted};
    }
    if (2 * (size_ + 1) > slots_.size()) Rehash(2 * slots_.size());
    size_t i = Home(key);
    for (; slots_[i].key != kEmpty; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return {&slots_[i].value, false};
    }
    slots_[i] = {key, value};
    ++size_;
    return {&slots_[i].value, true};
  }

  // Removes key; false when it was absent.
  bool Erase(int64_t key) {
    if (key == kEmpty) return std::exchange(has_empty_key_, false);
    size_t hole = Home(key);
    for (; slots_[hole].key != key; hole = (hole + 1) & mask_) {
      if (slots_[hole].key == kEmpty) return false;
    }
    // Backward shift: move each later entry of the run into the hole unless
    // its home lies cyclically in (hole, j], where it must stay reachable.
    for (size_t j = (hole + 1) & mask_; slots_[j].key != kEmpty; j = (j + 1) & mask_) {
      const size_t home = Home(slots_[j].key);
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!stays) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].key = kEmpty;
    --size_;
    return true;
  }

  // Makes room for n entries without further allocation.
  void Reserve(size_t n) {
    size_t capacity = kMinCapacity;
    while (capacity < 2 * n) capacity *= 2;
    if (capacity > slots_.size()) Rehash(capacity);
  }

  void Clear() {
    for (Slot& s : slots_) s.key = kEmpty;
    size_ = 0;
    has_empty_key_ = false;
  }

  // f(key, value&) for every entry, in no particular order.
  template <typename F>
  void ForEach(F f) {
    for (Slot& s : slots_)
      if (s.key != kEmpty) f(s.key, s.value);
    if (has_empty_key_) f(kEmpty, empty_key_value_);
  }

  // Removes every entry for which pred(key, value&) is true (pred may also
  // modify the value of an entry it keeps). One pass and a rebuild.
  template <typename Pred>
  void EraseIf(Pred pred) {
    Slots old(slots_.size(), Slot{kEmpty, V{}});
    old.swap(slots_);
    size_ = 0;
    for (Slot& s : old) {
      if (s.key != kEmpty && !pred(s.key, s.value)) Insert(s.key, s.value);
    }
    if (has_empty_key_ && pred(kEmpty, empty_key_value_)) has_empty_key_ = false;
  }

 private:
  struct Slot {
    int64_t key;
    V value;
  };
  // On 2 MiB pages once large (tensor_memory.h): lookups land anywhere.
  using Slots = std::vector<Slot, TensorAllocator<Slot>>;
  static constexpr int64_t kEmpty = std::numeric_limits<int64_t>::min();
  static constexpr size_t kMinCapacity = 16;

  size_t Home(int64_t key) const { return Mix64(static_cast<uint64_t>(key)) & mask_; }

  void Rehash(size_t capacity) {
    Slots old(capacity, Slot{kEmpty, V{}});
    old.swap(slots_);
    mask_ = capacity - 1;
    size_ = 0;
    for (const Slot& s : old)
      if (s.key != kEmpty) Insert(s.key, s.value);
  }

  Slots slots_;
  size_t mask_ = 0;
  size_t size_ = 0;  // entries in slots_
  bool has_empty_key_ = false;
  V empty_key_value_{};
};

}  // namespace pstrain
