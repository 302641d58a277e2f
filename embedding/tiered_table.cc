#include "embedding/tiered_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace pstrain {

EmbeddingTableOptions TieredTable::MemoryOptions(const EmbeddingTableOptions& options) {
  EmbeddingTableOptions memory = options;
  memory.max_rows = 0;
  return memory;
}

bool TieredTable::NeedsRecency(const EmbeddingTableOptions& options) {
  return options.evict_after_steps > 0 || options.max_rows > 0;
}

StatusOr<TierPolicy> ParseTierPolicy(const std::string& text) {
  if (text == "lru") return TierPolicy::kLru;
  if (text == "tinylfu") return TierPolicy::kTinyLfu;
  return InvalidArgument(fmt::format("tier policy '{}': expected lru or tinylfu", text));
}

StatusOr<TieredTable> TieredTable::Create(const EmbeddingTableOptions& options, int64_t budget_rows,
                                          RowStore* store, TierPolicy policy) {
  PSTRAIN_RETURN_IF_ERROR(options.Validate());
  auto memory = SparseTable::Create(MemoryOptions(options));
  if (!memory.ok()) return memory.status();
  return Over(options, budget_rows, store, std::move(*memory), policy, true);
}

StatusOr<TieredTable> TieredTable::Over(const EmbeddingTableOptions& options, int64_t budget_rows,
                                        RowStore* store, SparseTable memory, TierPolicy policy,
                                        bool new_table) {
  if (budget_rows < 1)
    return InvalidArgument(
        fmt::format("embedding table '{}': the memory budget must hold at least 1 row, got {}",
                    options.name, budget_rows));
  const size_t floats =
      static_cast<size_t>(options.dim) * (1 + static_cast<size_t>(memory.optimizer().num_slots()));
  auto table = store->OpenTable(options.name, floats, NeedsRecency(options), new_table);
  if (!table.ok()) return table.status();
  return TieredTable(options, budget_rows, store, *table, std::move(memory), policy);
}

TieredTable::TieredTable(const EmbeddingTableOptions& options, int64_t budget_rows, RowStore* store,
                         RowStore::TableId table, SparseTable memory, TierPolicy policy)
    : options_(options),
      budget_rows_(budget_rows),
      store_(store),
      table_(table),
      memory_(std::move(memory)),
      policy_(policy),
      keeps_disk_copies_(!NeedsRecency(options)),
      sketch_(policy == TierPolicy::kTinyLfu ? static_cast<size_t>(budget_rows) : 0) {
  const size_t floats =
      static_cast<size_t>(options.dim) * (1 + static_cast<size_t>(memory_.optimizer().num_slots()));
  fetched_ = RowBatch(floats);
  fetched_back_ = RowBatch(floats);
  spilled_ = RowBatch(floats);
}

int64_t TieredTable::RowsForBytes(const EmbeddingTableOptions& options, int64_t bytes) {
  const SparseOptimizer optimizer(options.optimizer, options.dim);
  // Every byte a resident row can take at its worst, so that the budget is
  // a bound and not an average: the row's floats; its metadata (id, last
  // touched, updates, two links: 32); its index entry, 16-byte slots at
  // most half full and doubling, so up to 64 bytes, and 32 more while a
  // doubling holds the old array and the new (96); and the TinyLFU
  // sketch's counters, 8 per row rounded up to a power of two (16).
  const int64_t per_row = static_cast<int64_t>(options.dim) * (1 + optimizer.num_slots()) *
                              static_cast<int64_t>(sizeof(float)) +
                          32 + 96 + 16;
  return std::max<int64_t>(1, bytes / per_row);
}

Status TieredTable::BringIn(const int64_t* ids, size_t n, bool creates) {
  for (size_t i = 0; i < n; ++i) PSTRAIN_RETURN_IF_ERROR(memory_.CheckId(ids[i]));
  if (!write_error_.ok()) {
    // The previous batch's write failed after that batch was applied: this
    // batch reports it, changing nothing; the rows are still in memory and
    // the next batch tries again.
    Status st = std::move(write_error_);
    write_error_ = Status::OK();
    return st;
  }
  missing_.clear();
  incoming_.clear();
  if (disk_rows_ == 0 && leaving_.empty() &&
      memory_.rows() + n <= static_cast<size_t>(budget_rows_)) {
    // Nothing on disk, nothing to spill, room for every row the batch could
    // add: the in-memory table alone (1.4x faster while the table fits).
    if (policy_ == TierPolicy::kTinyLfu)
      for (size_t i = 0; i < n; ++i) sketch_.Increment(ids[i]);
    return Status::OK();
  }
  dedup_.Reset(ids, n);
  in_batch_.Clear();
  for (int64_t id : dedup_.unique()) {
    if (memory_.Find(id)) {
      in_batch_.Insert(id, true);
    } else {
      missing_.push_back(id);
    }
  }

  // The rows chosen to leave (less those evict_after_steps or max_rows
  // dropped meanwhile) go now, but those this batch needs, which go with
  // the next one: a Lookup and the push of the same ids that follows it do
  // not undo the policy's choice.
  leave_now_.clear();
  size_t kept = 0;
  for (int64_t id : leaving_) {
    if (!memory_.Find(id)) continue;
    if (in_batch_.Find(id)) {
      leaving_[kept++] = id;
    } else {
      leave_now_.push_back(id);
    }
  }
  leaving_.resize(kept);
  spilled_.Clear();
  memory_.CopyRows(leave_now_, &spilled_);
  fetched_.Clear();
  // In id order: ReadMissing may split them, and rows come in (and their
  // ids are compared by the policy) in this order whether or not it does.
  std::sort(missing_.begin(), missing_.end());
  if (keeps_disk_copies_) {
    if (!missing_.empty() && disk_rows_ > 0) PSTRAIN_RETURN_IF_ERROR(ReadMissing());
    // The rows leaving are not the batch's: they are written while the
    // operation runs, and leave memory once written (FinishWrite).
    StartWrite();
  } else {
    if (!missing_.empty() && disk_rows_ > 0)
      PSTRAIN_RETURN_IF_ERROR(
          store_->MultiGet(table_, missing_.data(), missing_.size(), &fetched_));
    // The disk copies of the rows read go, so that the recency index holds
    // only rows on disk alone.
    erase_.clear();
    for (size_t i = 0; i < fetched_.size(); ++i)
      erase_.push_back({fetched_.ids[i], fetched_.last_touched[i]});
    // Nothing has changed yet: a failed write leaves the table as it was.
    PSTRAIN_RETURN_IF_ERROR(store_->Write(table_, spilled_, erase_));
    memory_.Remove(leave_now_);
    disk_rows_ += static_cast<int64_t>(spilled_.size());
    moved_.spilled += static_cast<int64_t>(spilled_.size());
  }

  memory_.InsertRows(fetched_);
  disk_rows_ -= static_cast<int64_t>(fetched_.size());
  moved_.fetched += static_cast<int64_t>(fetched_.size());
  // The rows that came in: read back, and (Lookup) created by the operation.
  incoming_.assign(fetched_.ids.begin(), fetched_.ids.end());
  if (creates) {
    for (int64_t id : missing_) in_batch_.Insert(id, true);
  } else {
    for (int64_t id : incoming_) in_batch_.Insert(id, true);
  }
  if (policy_ == TierPolicy::kTinyLfu)
    for (int64_t id : dedup_.unique()) sketch_.Increment(id);
  return Status::OK();
}

// Large reads are split in two halves of the ids (sorted by BringIn), one
// read on the writer's thread: a MultiGet is half of a batch's time at 10%
// resident. Rows come in as one read would bring them (id order), so that
// where rows go never depends on the split.
Status TieredTable::ReadMissing() {
  constexpr size_t kSplitAbove = 256;
  if (missing_.size() <= kSplitAbove)
    return store_->MultiGet(table_, missing_.data(), missing_.size(), &fetched_);
  const size_t half = missing_.size() / 2;
  fetched_back_.Clear();
  writer_->Start([this, half] {
    return store_->MultiGet(table_, missing_.data() + half, missing_.size() - half, &fetched_back_);
  });
  Status front = store_->MultiGet(table_, missing_.data(), half, &fetched_);
  Status back = writer_->Wait();
  PSTRAIN_RETURN_IF_ERROR(front);
  PSTRAIN_RETURN_IF_ERROR(back);
  fetched_.Append(fetched_back_);
  return Status::OK();
}

void TieredTable::StartWrite() {
  if (spilled_.empty()) return;
  // spilled_ and leave_now_ stay as they are until FinishWrite.
  writer_->Start([this] { return store_->Write(table_, spilled_, no_erasures_); });
}

void TieredTable::FinishWrite() {
  if (!writer_->busy()) return;
  Status st = writer_->Wait();
  if (!st.ok()) {
    // The rows stay in memory, unchanged, and leave with a later batch.
    leaving_.insert(leaving_.end(), leave_now_.begin(), leave_now_.end());
    write_error_ = std::move(st);
    return;
  }
  memory_.Remove(leave_now_);
  disk_rows_ += static_cast<int64_t>(spilled_.size());
  moved_.spilled += static_cast<int64_t>(spilled_.size());
}

Status TieredTable::SpillPastBudget() {
  constexpr size_t kRowsPerWrite = 65536;
  const auto never = [](int64_t) { return false; };
  while (static_cast<int64_t>(memory_.rows()) > budget_rows_) {
    const auto over = static_cast<size_t>(static_cast<int64_t>(memory_.rows()) - budget_rows_);
    const std::vector<int64_t> ids = memory_.BackIds(std::min(over, kRowsPerWrite), never);
    spilled_.Clear();
    memory_.CopyRows(ids, &spilled_);
    PSTRAIN_RETURN_IF_ERROR(store_->Write(table_, spilled_, no_erasures_));
    memory_.Remove(ids);
    disk_rows_ += static_cast<int64_t>(ids.size());
    moved_.spilled += static_cast<int64_t>(ids.size());
  }
  return Status::OK();
}

void TieredTable::ChooseLeaving() {
  const int64_t over =
      static_cast<int64_t>(memory_.rows()) - budget_rows_ - static_cast<int64_t>(leaving_.size());
  if (over <= 0) return;
  if (incoming_.size() < missing_.size()) {  // Lookup may have created rows
    incoming_.clear();
    for (int64_t id : missing_)
      if (memory_.Find(id)) incoming_.push_back(id);
  }
  // Rows already leaving are this batch's (BringIn), so victims skip them.
  const std::vector<int64_t> victims = memory_.BackIds(
      static_cast<size_t>(over), [this](int64_t id) { return in_batch_.Find(id) != nullptr; });
  auto need = static_cast<size_t>(over);
  size_t v = 0;
  // The rows that came in and took free room: all of them with LRU.
  size_t free = incoming_.size();
  if (policy_ == TierPolicy::kTinyLfu) {
    // As RowCache::Put, row by row: each row in past the free room stays
    // only if its id was asked for more often than the victim's.
    free = incoming_.size() > need ? incoming_.size() - need : 0;
    for (size_t i = free; i < incoming_.size(); ++i, --need) {
      const bool stays =
          v < victims.size() && sketch_.Estimate(incoming_[i]) > sketch_.Estimate(victims[v]);
      leaving_.push_back(stays ? victims[v++] : incoming_[i]);
    }
  }
  // The least recently touched; then, for a batch larger than the budget,
  // the batch's own rows that came in.
  for (; need > 0 && v < victims.size(); --need) leaving_.push_back(victims[v++]);
  for (size_t i = 0; need > 0 && i < free; ++i, --need) leaving_.push_back(incoming_[i]);
}

Status TieredTable::Lookup(const int64_t* ids, size_t n, float* out, int64_t step) {
  Status st = BringIn(ids, n, true);
  if (st.ok()) st = memory_.Lookup(ids, n, out, step);
  FinishWrite();
  PSTRAIN_RETURN_IF_ERROR(st);
  PSTRAIN_RETURN_IF_ERROR(DropPastMaxRows());
  ChooseLeaving();
  return Status::OK();
}

Status TieredTable::ApplyGradients(const int64_t* ids, const float* grads, size_t n, int64_t step) {
  if (n == 0) return memory_.ApplyGradients(ids, grads, n, step);  // as SparseTable: no clock
  Status st = BringIn(ids, n, false);
  if (st.ok()) st = memory_.ApplyGradients(ids, grads, n, step);
  FinishWrite();
  PSTRAIN_RETURN_IF_ERROR(st);
  ChooseLeaving();
  return Status::OK();
}

Status TieredTable::DropFromDisk(int64_t touched_before, int64_t max_count) {
  auto erased = store_->EraseOldest(table_, touched_before, max_count);
  if (!erased.ok()) return erased.status();
  disk_rows_ -= *erased;
  dropped_ += *erased;
  return Status::OK();
}

// Least recently touched first, from whichever tier holds it: disk rows
// touched before memory's oldest, then memory rows touched no later than
// disk's oldest, and again.
Status TieredTable::DropPastMaxRows() {
  if (options_.max_rows <= 0) return Status::OK();
  int64_t excess = static_cast<int64_t>(memory_.rows()) + disk_rows_ - options_.max_rows;
  const auto never = [](int64_t) { return false; };
  while (excess > 0) {
    const std::vector<int64_t> back = memory_.BackIds(1, never);
    const int64_t memory_oldest =
        back.empty() ? std::numeric_limits<int64_t>::max() : memory_.Find(back[0])->last_touched;
    const int64_t before = disk_rows_;
    if (disk_rows_ > 0) PSTRAIN_RETURN_IF_ERROR(DropFromDisk(memory_oldest, excess));
    capacity_dropped_ += before - disk_rows_;
    excess -= before - disk_rows_;
    if (excess == 0 || back.empty()) break;
    int64_t disk_oldest = std::numeric_limits<int64_t>::max();
    if (disk_rows_ > 0) {
      auto oldest = store_->OldestTouched(table_);
      if (!oldest.ok()) return oldest.status();
      disk_oldest = *oldest;
    }
    int64_t removed = 0;
    for (std::vector<int64_t> ids = back; excess > 0 && !ids.empty();
         ids = memory_.BackIds(1, never)) {
      if (memory_.Find(ids[0])->last_touched > disk_oldest) break;
      memory_.Remove(ids);
      --excess;
      ++removed;
    }
    dropped_ += removed;
    capacity_dropped_ += removed;
    if (removed == 0 && before == disk_rows_) break;  // cannot happen; never loop forever
  }
  return Status::OK();
}

StatusOr<int64_t> TieredTable::EvictUntouched(int64_t step) {
  const int64_t evicted = memory_.EvictUntouched(step);
  if (options_.evict_after_steps <= 0 || disk_rows_ == 0) return evicted;
  // Rows with clock - last_touched > evict_after_steps.
  const int64_t before = disk_rows_;
  PSTRAIN_RETURN_IF_ERROR(DropFromDisk(memory_.clock() - options_.evict_after_steps,
                                       std::numeric_limits<int64_t>::max()));
  return evicted + before - disk_rows_;
}

StatusOr<std::optional<TieredTable::Row>> TieredTable::Find(int64_t id) const {
  const size_t dim = static_cast<size_t>(options_.dim);
  const size_t slots = dim * static_cast<size_t>(memory_.optimizer().num_slots());
  if (auto view = memory_.Find(id)) {
    return std::optional<Row>(Row{{view->values, view->values + dim},
                                  {view->slots, view->slots + slots},
                                  view->last_touched,
                                  view->updates});
  }
  if (disk_rows_ == 0) return std::optional<Row>();
  RowBatch found(dim + slots);
  PSTRAIN_RETURN_IF_ERROR(store_->MultiGet(table_, &id, 1, &found));
  if (found.empty()) return std::optional<Row>();
  return std::optional<Row>(Row{{found.row(0), found.row(0) + dim},
                                {found.row(0) + dim, found.row(0) + dim + slots},
                                found.last_touched[0],
                                found.updates[0]});
}

Status TieredTable::ForEachRow(
    const std::function<Status(int64_t id, const SparseTable::RowView&)>& fn) const {
  std::vector<int64_t> resident = memory_.Ids();
  std::sort(resident.begin(), resident.end());
  size_t next = 0;
  const auto emit_resident_below = [&](int64_t bound) -> Status {
    for (; next < resident.size() && resident[next] < bound; ++next)
      PSTRAIN_RETURN_IF_ERROR(fn(resident[next], *memory_.Find(resident[next])));
    return Status::OK();
  };
  std::unique_ptr<RowStore::Iterator> it = store_->NewIterator(table_);
  for (; it->Valid(); it->Next()) {
    PSTRAIN_RETURN_IF_ERROR(emit_resident_below(it->id()));
    if (next < resident.size() && resident[next] == it->id()) {
      if (keeps_disk_copies_) continue;  // an old copy: memory's is current
      return Internal(fmt::format("embedding table '{}': row {} is both in memory and on disk",
                                  options_.name, it->id()));
    }
    const SparseTable::RowView view{it->data(), it->data() + options_.dim, it->last_touched(),
                                    it->updates()};
    PSTRAIN_RETURN_IF_ERROR(fn(it->id(), view));
  }
  PSTRAIN_RETURN_IF_ERROR(it->status());
  for (; next < resident.size(); ++next)
    PSTRAIN_RETURN_IF_ERROR(fn(resident[next], *memory_.Find(resident[next])));
  return Status::OK();
}

EmbeddingTableCounters TieredTable::counters() const {
  EmbeddingTableCounters c = memory_.counters();
  c.rows += disk_rows_;
  c.evictions += dropped_;
  c.capacity_evictions += capacity_dropped_;
  return c;
}

TieredTableCounters TieredTable::tier_counters() const {
  TieredTableCounters c = moved_;
  c.resident = static_cast<int64_t>(memory_.rows());
  c.on_disk = disk_rows_;
  return c;
}

}  // namespace pstrain
