// RowCache: a worker's copy of recently pulled embedding rows of one table,
// at most `capacity` rows of `dim` floats, so that hot rows are not pulled
// every step. In async/ssp mode a row may be served up to max_staleness steps
// after it was pulled; in sync mode the caller passes 0 and invalidates what
// it pushes (or clears the cache each step).
//
// Policy: LRU eviction with TinyLFU admission. Every Get counts the id in a
// FrequencySketch; when the cache is full, a new row is admitted only if its
// id was requested more often (recently) than the id of the LRU victim,
// otherwise the row is not cached. Embedding ids are Zipf-distributed: plain
// LRU lets the long tail of one-off ids flush hot rows on every miss, while
// LFU keeps exactly the most frequent rows (the best a cache can do on a
// stable Zipf stream) but needs frequency buckets and never forgets. TinyLFU
// gets LFU's hit rate in fixed memory (8 bytes of counters per row) with
// aging, and every operation stays O(1): one sketch update, one hash lookup,
// a list splice. The test suite measures it against plain LRU on Zipf(1.05).
//
// Storage: a FlatIdMap from id to slot; rows in one arena of capacity * dim
// floats allocated at construction; nothing is allocated afterwards.
// Thread-safety: none; the worker thread that assembles batches owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "embedding/frequency_sketch.h"
#include "embedding/id_map.h"
#include "embedding/recency_list.h"

namespace pstrain {

struct RowCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;        // absent or stale
  int64_t stale_misses = 0;  // of the misses, present but too old
  int64_t evictions = 0;     // rows dropped to admit another
  int64_t rejections = 0;    // Puts not cached: the victim was more popular
};

class RowCache {
 public:
  // capacity 0: a cache that holds nothing (every Get misses).
  RowCache(size_t capacity, int dim);

  // The cached row (dim floats) when it was put at a step >= step -
  // max_staleness, else nullptr (a miss). Valid until the next Put,
  // Invalidate or Clear. Counts the access for admission.
  const float* Get(int64_t id, int64_t step, int64_t max_staleness);

  // Whether Get(id, step, max_staleness) would hit, without counting an
  // access or touching the LRU order (a prefetcher's look ahead).
  bool Has(int64_t id, int64_t step, int64_t max_staleness) const;

  // Caches row (dim floats, copied) as pulled at `step`, replacing a cached
  // copy. When full, evicts the least recently used row if admission allows;
  // returns whether the row is now cached.
  bool Put(int64_t id, const float* row, int64_t step);

  void Invalidate(int64_t id);
  void Clear();  // drops every row; keeps the frequency counts and stats

  size_t size() const { return index_.size(); }
  size_t capacity() const { return capacity_; }
  const RowCacheStats& stats() const { return stats_; }

 private:
  static constexpr uint32_t kNone = RecencyList::kNone;
  struct Entry {
    int64_t id;
    int64_t step;
    uint32_t prev, next;  // LRU list, front = most recent
  };

  float* Row(uint32_t slot) { return values_.data() + slot * dim_; }

  const size_t capacity_;
  const size_t dim_;
  FlatIdMap<uint32_t> index_;  // id -> slot
  std::vector<Entry> entries_;
  std::vector<float> values_;
  std::vector<uint32_t> free_;
  RecencyList lru_;  // through entries_
  FrequencySketch sketch_;
  RowCacheStats stats_;
};

}  // namespace pstrain
