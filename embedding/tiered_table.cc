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

StatusOr<TieredTable> TieredTable::Create(const EmbeddingTableOptions& options, int64_t budget_rows,
                                          RowStore* store) {
  PSTRAIN_RETURN_IF_ERROR(options.Validate());
  if (budget_rows < 1)
    return InvalidArgument(
        fmt::format("embedding table '{}': the memory budget must hold at least 1 row, got {}",
                    options.name, budget_rows));
  auto memory = SparseTable::Create(MemoryOptions(options));
  if (!memory.ok()) return memory.status();
  const size_t floats =
      static_cast<size_t>(options.dim) * (1 + static_cast<size_t>(memory->optimizer().num_slots()));
  auto table = store->OpenTable(options.name, floats, NeedsRecency(options), true);
  if (!table.ok()) return table.status();
  return TieredTable(options, budget_rows, store, *table, std::move(*memory));
}

TieredTable::TieredTable(const EmbeddingTableOptions& options, int64_t budget_rows, RowStore* store,
                         RowStore::TableId table, SparseTable memory)
    : options_(options),
      budget_rows_(budget_rows),
      store_(store),
      table_(table),
      memory_(std::move(memory)) {
  const size_t floats =
      static_cast<size_t>(options.dim) * (1 + static_cast<size_t>(memory_.optimizer().num_slots()));
  fetched_ = RowBatch(floats);
  spilled_ = RowBatch(floats);
}

int64_t TieredTable::RowsForBytes(const EmbeddingTableOptions& options, int64_t bytes) {
  const SparseOptimizer optimizer(options.optimizer, options.dim);
  // Row data, the row's metadata (id, last touched, updates, two links) and
  // its index entry (16-byte slots, at most half full).
  const int64_t per_row = static_cast<int64_t>(options.dim) * (1 + optimizer.num_slots()) *
                              static_cast<int64_t>(sizeof(float)) +
                          32 + 32;
  return std::max<int64_t>(1, bytes / per_row);
}

Status TieredTable::BringIn(const int64_t* ids, size_t n, bool creates) {
  for (size_t i = 0; i < n; ++i) PSTRAIN_RETURN_IF_ERROR(memory_.CheckId(ids[i]));
  dedup_.Reset(ids, n);
  missing_.clear();
  in_batch_.Clear();
  for (int64_t id : dedup_.unique()) {
    if (memory_.Find(id)) {
      in_batch_.Insert(id, true);
    } else {
      missing_.push_back(id);
    }
  }
  fetched_.Clear();
  if (!missing_.empty() && disk_rows_ > 0)
    PSTRAIN_RETURN_IF_ERROR(store_->MultiGet(table_, missing_.data(), missing_.size(), &fetched_));

  // Room for the rows read, and for the rows Lookup may create, made by the
  // least recently touched rows that are not the batch's.
  const size_t resident = memory_.rows();
  const size_t wanted = resident + (creates ? missing_.size() : fetched_.size());
  const auto budget = static_cast<size_t>(budget_rows_);
  spilled_.Clear();
  if (wanted > budget) {
    memory_.CopyBack(
        wanted - budget, [this](int64_t id) { return in_batch_.Find(id) != nullptr; }, &spilled_);
  }
  erase_.clear();
  for (size_t i = 0; i < fetched_.size(); ++i)
    erase_.push_back({fetched_.ids[i], fetched_.last_touched[i]});
  // Nothing has changed yet: a failed write leaves the table as it was.
  PSTRAIN_RETURN_IF_ERROR(store_->Write(table_, spilled_, erase_));

  memory_.Remove(spilled_.ids);
  memory_.InsertRows(fetched_);
  disk_rows_ += static_cast<int64_t>(spilled_.size()) - static_cast<int64_t>(fetched_.size());
  moved_.spilled += static_cast<int64_t>(spilled_.size());
  moved_.fetched += static_cast<int64_t>(fetched_.size());
  return Status::OK();
}

Status TieredTable::Lookup(const int64_t* ids, size_t n, float* out, int64_t step) {
  PSTRAIN_RETURN_IF_ERROR(BringIn(ids, n, true));
  PSTRAIN_RETURN_IF_ERROR(memory_.Lookup(ids, n, out, step));
  return DropPastMaxRows();
}

Status TieredTable::ApplyGradients(const int64_t* ids, const float* grads, size_t n, int64_t step) {
  if (n == 0) return memory_.ApplyGradients(ids, grads, n, step);  // as SparseTable: no clock
  PSTRAIN_RETURN_IF_ERROR(BringIn(ids, n, false));
  return memory_.ApplyGradients(ids, grads, n, step);
}

// Rows on disk were all touched no later than rows in memory, so the oldest
// go first, then memory's least recent.
Status TieredTable::DropPastMaxRows() {
  if (options_.max_rows <= 0) return Status::OK();
  int64_t excess = static_cast<int64_t>(memory_.rows()) + disk_rows_ - options_.max_rows;
  if (excess <= 0) return Status::OK();
  if (disk_rows_ > 0) {
    auto erased = store_->EraseOldest(table_, std::numeric_limits<int64_t>::max(),
                                      std::min(excess, disk_rows_));
    if (!erased.ok()) return erased.status();
    disk_rows_ -= *erased;
    excess -= *erased;
    dropped_ += *erased;
    capacity_dropped_ += *erased;
  }
  if (excess > 0) {
    const auto k = std::min(static_cast<size_t>(excess), memory_.rows());
    memory_.RemoveBack(k);
    dropped_ += static_cast<int64_t>(k);
    capacity_dropped_ += static_cast<int64_t>(k);
  }
  return Status::OK();
}

StatusOr<int64_t> TieredTable::EvictUntouched(int64_t step) {
  int64_t evicted = memory_.EvictUntouched(step);
  if (options_.evict_after_steps <= 0 || disk_rows_ == 0) return evicted;
  // Rows with clock - last_touched > evict_after_steps.
  auto erased = store_->EraseOldest(table_, memory_.clock() - options_.evict_after_steps,
                                    std::numeric_limits<int64_t>::max());
  if (!erased.ok()) return erased.status();
  disk_rows_ -= *erased;
  dropped_ += *erased;
  return evicted + *erased;
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
    if (next < resident.size() && resident[next] == it->id())
      return Internal(fmt::format("embedding table '{}': row {} is both in memory and on disk",
                                  options_.name, it->id()));
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
