#include "embedding/sparse_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <iterator>
#include <new>

#include "embedding/row_init.h"

namespace pstrain {

StatusOr<SparseTable> SparseTable::Create(const EmbeddingTableOptions& options) {
  PSTRAIN_RETURN_IF_ERROR(options.Validate());
  // max_rows reserves the index up front: too many for this machine is an
  // error for the job, not an abort.
  try {
    return SparseTable(options);
  } catch (const std::bad_alloc& e) {
    return InvalidArgument(
        fmt::format("embedding table '{}': no memory for an index of {} rows: {}", options.name,
                    options.max_rows, e.what()));
  }
}

SparseTable::SparseTable(const EmbeddingTableOptions& options)
    : options_(options),
      optimizer_(options.optimizer, options.dim),
      stride_(static_cast<size_t>(options.dim) * (1 + optimizer_.num_slots())),
      row_limit_(options.max_rows > 0 ? static_cast<size_t>(options.max_rows) : kNone - 1),
      arena_(stride_) {
  if (options.max_rows > 0) {
    index_.Reserve(row_limit_);
    meta_.reserve(row_limit_);
  }
}

Status SparseTable::CheckId(int64_t id) const {
  if (id < 0) {
    return InvalidArgument(
        fmt::format("embedding table '{}': id {} is negative", options_.name, id));
  }
  if (options_.vocab > 0 && id >= options_.vocab) {
    return InvalidArgument(
        fmt::format("embedding table '{}': id {} is outside the vocabulary [0, {})", options_.name,
                    id, options_.vocab));
  }
  return Status::OK();
}

Status SparseTable::CheckIds(const int64_t* ids, size_t n) const {
  // One cheap pass first, so that a bad id changes nothing.
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || (options_.vocab > 0 && ids[i] >= options_.vocab)) return CheckId(ids[i]);
  }
  return Status::OK();
}

void SparseTable::AdvanceClock(int64_t step) { clock_ = std::max(clock_, step); }

// A batch's ids are spread over the whole index and arena, so each one
// waits on memory three times in a row: for its index slot, then for its
// row and metadata, then for its recency-list neighbours (Touch relinks
// them). Starting each load some ids ahead lets the waits of different ids
// overlap instead of adding up. The row the row stage finds is kept for the
// neighbours' stage, so an id is looked up ahead once, not twice. In a
// 1M-row dim-64 adagrad table on huge pages, 16K lookups went from 2.9 to
// about 2 ms and 16K updates from 15 to about 5 ms.
class SparseTable::Prefetcher {
 public:
  Prefetcher(const SparseTable& table, const int64_t* ids, size_t n, size_t floats)
      : t_(table), ids_(ids), n_(n), floats_(floats) {
    for (size_t k = 0; k < std::min(n, kSlotAhead); ++k) t_.index_.Prefetch(ids[k]);
    std::fill(std::begin(rows_), std::end(rows_), kNone);
  }
  // At the top of iteration i of the pass.
  void Ahead(size_t i) {
    if (i + kSlotAhead < n_) t_.index_.Prefetch(ids_[i + kSlotAhead]);
    if (i + kRowAhead < n_) rows_[(i + kRowAhead) % kRing] = PrefetchRow(ids_[i + kRowAhead]);
    if (i + kNeighboursAhead < n_) PrefetchNeighbours(rows_[(i + kNeighboursAhead) % kRing]);
  }

 private:
  // Ids ahead of the current one at which each load starts (tried 8 to 24
  // on 16K-id pulls and updates; these were best or within noise).
  static constexpr size_t kSlotAhead = 16, kRowAhead = 8, kNeighboursAhead = 4;
  static constexpr size_t kRing = 8;  // > kRowAhead - kNeighboursAhead

  // Loads the id's metadata and first `floats_` of its row; returns the row.
  uint32_t PrefetchRow(int64_t id) const {
    const uint32_t* found = t_.index_.Find(id);
    if (found == nullptr) return kNone;
    PrefetchForRead(&t_.meta_[*found]);
    // Every cache line, the last one too when the row does not start on one.
    const auto begin = reinterpret_cast<uintptr_t>(t_.RowData(*found));
    const uintptr_t end = begin + floats_ * sizeof(float);
    for (uintptr_t line = begin & ~uintptr_t{63}; line < end; line += 64)
      PrefetchForRead(reinterpret_cast<const void*>(line));
    return *found;
  }
  // `row` may be stale (rows move when one is removed): a prefetch of the
  // wrong row costs nothing but the load.
  void PrefetchNeighbours(uint32_t row) const {
    if (row >= t_.meta_.size()) return;
    const RowMeta& meta = t_.meta_[row];
    if (meta.last_touched >= t_.clock_) return;  // Touch will not move it
    if (meta.prev != kNone && meta.prev < t_.meta_.size()) PrefetchForRead(&t_.meta_[meta.prev]);
    if (meta.next != kNone && meta.next < t_.meta_.size()) PrefetchForRead(&t_.meta_[meta.next]);
  }

  const SparseTable& t_;
  const int64_t* ids_;
  size_t n_;
  size_t floats_;
  uint32_t rows_[kRing];  // row of ids_[j] at j % kRing, from the row stage
};

Status SparseTable::Lookup(const int64_t* ids, size_t n, float* out, int64_t step) {
  PSTRAIN_RETURN_IF_ERROR(CheckIds(ids, n));
  AdvanceClock(step);
  const size_t dim = static_cast<size_t>(options_.dim);
  counters_.lookups += static_cast<int64_t>(n);
  Prefetcher prefetcher(*this, ids, n, dim);
  for (size_t i = 0; i < n; ++i, out += dim) {
    prefetcher.Ahead(i);
    uint32_t row;
    if (const uint32_t* found = index_.Find(ids[i])) {
      row = *found;
      Touch(row);
    } else if (Admit(ids[i])) {
      row = AddRow(ids[i], clock_);
      InitRow(options_, ids[i], RowData(row));
      optimizer_.InitSlots(RowData(row) + dim);
    } else {
      std::fill(out, out + dim, 0.0f);
      continue;
    }
    std::memcpy(out, RowData(row), dim * sizeof(float));
  }
  return Status::OK();
}

Status SparseTable::ApplyGradients(const int64_t* ids, const float* grads, size_t n, int64_t step) {
  PSTRAIN_RETURN_IF_ERROR(CheckIds(ids, n));
  if (n == 0) return Status::OK();
  AdvanceClock(step);
  const size_t dim = static_cast<size_t>(options_.dim);
  const float lr = optimizer_.ScheduledLr(table_updates_);
  ++table_updates_;
  Prefetcher prefetcher(*this, ids, n, stride_);
  for (size_t i = 0; i < n; ++i, grads += dim) {
    prefetcher.Ahead(i);
    const uint32_t* found = index_.Find(ids[i]);
    if (found == nullptr) {
      ++counters_.dropped_gradients;
      continue;
    }
    Touch(*found);
    float* values = RowData(*found);
    optimizer_.Update(values, values + dim, grads, ++meta_[*found].updates, lr);
  }
  return Status::OK();
}

int64_t SparseTable::EvictUntouched(int64_t step) {
  AdvanceClock(step);
  if (options_.evict_after_steps <= 0) return 0;
  int64_t evicted = 0;
  while (lru_.back() != kNone &&
         clock_ - meta_[lru_.back()].last_touched > options_.evict_after_steps) {
    RemoveRow(lru_.back());
    ++evicted;
  }
  counters_.evictions += evicted;
  return evicted;
}

std::optional<SparseTable::RowView> SparseTable::Find(int64_t id) const {
  const uint32_t* found = index_.Find(id);
  if (found == nullptr) return std::nullopt;
  const RowMeta& meta = meta_[*found];
  const float* data = RowData(*found);
  return RowView{data, data + options_.dim, meta.last_touched, meta.updates};
}

EmbeddingTableCounters SparseTable::counters() const {
  EmbeddingTableCounters c = counters_;
  c.rows = static_cast<int64_t>(meta_.size());
  c.pending_ids = static_cast<int64_t>(sightings_.size());
  return c;
}

bool SparseTable::Admit(int64_t id) {
  if (options_.admit_after <= 1) return true;
  uint32_t* count = sightings_.Find(id);
  if (count == nullptr) {
    // Bounded memory: at the limit, halve every count and forget the zeros.
    // Counts stay below admit_after, so a few rounds empty the map at worst.
    while (sightings_.size() >= static_cast<size_t>(options_.max_pending_ids)) {
      sightings_.EraseIf([](int64_t, uint32_t& c) { return (c /= 2) == 0; });
    }
    count = sightings_.Insert(id, 0).first;
  }
  if (static_cast<int64_t>(++*count) < options_.admit_after) return false;
  sightings_.Erase(id);
  return true;
}

uint32_t SparseTable::AddRow(int64_t id, int64_t last_touched) {
  if (meta_.size() >= row_limit_) {
    RemoveRow(lru_.back());
    ++counters_.evictions;
    ++counters_.capacity_evictions;
  }
  const auto row = static_cast<uint32_t>(meta_.size());
  meta_.push_back({id, last_touched, 0, kNone, kNone});
  arena_.Resize(meta_.size());
  index_.Insert(id, row);
  lru_.PushFront(meta_, row);
  ++counters_.admissions;
  return row;
}

void SparseTable::RemoveRow(uint32_t row) {
  assert(row < meta_.size());
  lru_.Unlink(meta_, row);
  index_.Erase(meta_[row].id);
  const auto last = static_cast<uint32_t>(meta_.size() - 1);
  if (row != last) {
    // The last row takes the hole: its data, metadata, links and index entry.
    std::memcpy(RowData(row), RowData(last), stride_ * sizeof(float));
    meta_[row] = meta_[last];
    lru_.Relink(meta_, row);
    *index_.Find(meta_[row].id) = row;
  }
  meta_.pop_back();
}

std::vector<int64_t> SparseTable::BackIds(size_t k,
                                          const std::function<bool(int64_t)>& skip) const {
  std::vector<int64_t> ids;
  for (uint32_t row = lru_.back(); row != kNone && ids.size() < k; row = meta_[row].prev)
    if (!skip(meta_[row].id)) ids.push_back(meta_[row].id);
  return ids;
}

void SparseTable::CopyRows(const std::vector<int64_t>& ids, RowBatch* out) const {
  assert(out->floats == stride_);
  for (int64_t id : ids) {
    const uint32_t* found = index_.Find(id);
    assert(found != nullptr);
    out->Add(id, RowData(*found), meta_[*found].last_touched, meta_[*found].updates);
  }
}

void SparseTable::Remove(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    const uint32_t* found = index_.Find(id);
    assert(found != nullptr);
    RemoveRow(*found);
  }
}

void SparseTable::InsertRows(const RowBatch& rows) {
  assert(rows.floats == stride_);
  for (size_t i = 0; i < rows.size(); ++i) {
    assert(index_.Find(rows.ids[i]) == nullptr);
    const uint32_t row = AddRow(rows.ids[i], rows.last_touched[i]);
    --counters_.admissions;  // brought back, not created
    meta_[row].updates = rows.updates[i];
    std::memcpy(RowData(row), rows.row(i), stride_ * sizeof(float));
  }
}

std::vector<int64_t> SparseTable::Ids() const {
  std::vector<int64_t> ids(meta_.size());
  for (size_t row = 0; row < meta_.size(); ++row) ids[row] = meta_[row].id;
  return ids;
}

Status SparseTable::CheckNewRows(const RowBatch& rows) const {
  const auto bad = [&](const std::string& what) {
    return InvalidArgument(fmt::format("embedding table '{}': cannot add {} rows: {}",
                                       options_.name, rows.size(), what));
  };
  const size_t n = rows.size();
  if (rows.floats != stride_)
    return bad(fmt::format("rows of {} floats, this table's have {}", rows.floats, stride_));
  if (rows.data.size() != n * stride_ || rows.last_touched.size() != n || rows.updates.size() != n)
    return bad("the batch's arrays differ in size");
  if (n >= kNone - meta_.size())
    return bad(fmt::format("the table would hold more than {} rows", kNone - 1));
  for (size_t i = 0; i < n; ++i) {
    PSTRAIN_RETURN_IF_ERROR(CheckId(rows.ids[i]));
    if (index_.Find(rows.ids[i]) != nullptr)
      return bad(fmt::format("id {} already has a row here", rows.ids[i]));
    if (rows.last_touched[i] < 0 || rows.updates[i] < 0)
      return bad(fmt::format("row {} has a negative step or update count", rows.ids[i]));
  }
  std::vector<int64_t> sorted = rows.ids;
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end()) return bad(fmt::format("id {} is in the batch twice", *twice));
  return Status::OK();
}

void SparseTable::MergeRows(const RowBatch& rows) {
  assert(rows.floats == stride_);
  if (rows.empty()) return;
  const size_t here = meta_.size(), total = here + rows.size();
  std::vector<uint32_t> old_rows, new_rows;   // each least recent first
  const uint32_t most_recent = lru_.front();  // kNone: no row here
  meta_.reserve(total);
  arena_.Resize(total);
  index_.Reserve(total);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto row = static_cast<uint32_t>(meta_.size());
    assert(index_.Find(rows.ids[i]) == nullptr);
    meta_.push_back({rows.ids[i], rows.last_touched[i], rows.updates[i], kNone, kNone});
    index_.Insert(rows.ids[i], row);
    std::memcpy(RowData(row), rows.row(i), stride_ * sizeof(float));
    // Sightings of an id that now has a row would never be read again.
    sightings_.Erase(rows.ids[i]);
    new_rows.push_back(row);
  }
  const auto touched = [&](uint32_t row) { return meta_[row].last_touched; };
  std::stable_sort(new_rows.begin(), new_rows.end(),
                   [&](uint32_t a, uint32_t b) { return touched(a) < touched(b); });
  // Rows touched no earlier than the most recent here (what changed since a
  // copy ahead, roles/server/table_moves.h) go in front as they are: the
  // merge below would put them there too, after walking every row here.
  if (most_recent == kNone || touched(new_rows.front()) >= touched(most_recent)) {
    for (uint32_t row : new_rows) lru_.PushFront(meta_, row);
    EvictPastLimit();
    return;
  }
  old_rows.reserve(here);
  for (uint32_t row = lru_.back(); row != kNone; row = meta_[row].prev) old_rows.push_back(row);
  // A merge by hand, not std::merge: the rows here are in recency order,
  // which rows read back from disk (InsertRows) may leave unsorted by step.
  lru_.Clear();
  size_t o = 0, k = 0;
  while (o < old_rows.size() || k < new_rows.size()) {
    const bool take_new = o == old_rows.size() ||
                          (k < new_rows.size() && touched(new_rows[k]) < touched(old_rows[o]));
    lru_.PushFront(meta_, take_new ? new_rows[k++] : old_rows[o++]);
  }
  EvictPastLimit();
}

void SparseTable::EvictPastLimit() {
  while (meta_.size() > row_limit_) {
    RemoveRow(lru_.back());
    ++counters_.evictions;
    ++counters_.capacity_evictions;
  }
}

void SparseTable::Touch(uint32_t row) {
  RowMeta& meta = meta_[row];
  if (meta.last_touched >= clock_) return;  // already among this step's rows
  meta.last_touched = clock_;
  lru_.MoveToFront(meta_, row);
}

}  // namespace pstrain
