// TieredTable::TakeRows and PutRows: rows leaving for, or arriving from,
// another server's share of the table (tiered_table.h says what each
// guarantees). Both change the table only once the store has done its part,
// so that a failed read or write leaves it as it was.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "embedding/tiered_table.h"

namespace pstrain {

void TieredTable::ForgetLeavingGone() {
  leaving_.erase(std::remove_if(leaving_.begin(), leaving_.end(),
                                [this](int64_t id) { return !memory_.Find(id); }),
                 leaving_.end());
}

StatusOr<RowBatch> TieredTable::TakeRows(const std::function<bool(int64_t)>& leaving) {
  // Every batch waits for its own write (Lookup, ApplyGradients): nothing
  // is under way here, and this only makes sure of it.
  FinishWrite();
  RowBatch taken(spilled_.floats);
  std::vector<int64_t> from_memory;
  for (int64_t id : memory_.Ids())
    if (leaving(id)) from_memory.push_back(id);
  memory_.CopyRows(from_memory, &taken);
  std::vector<RowStore::Erasure> erase;
  if (keeps_disk_copies_) {
    // A row in memory may keep a stale disk copy (no recency index here, so
    // the step in the erasure finds nothing else): it must go too, or the
    // row would come back from disk, old, when its id is next asked for.
    for (size_t i = 0; i < taken.size(); ++i)
      erase.push_back({taken.ids[i], taken.last_touched[i]});
  }
  int64_t from_disk = 0;
  if (disk_rows_ > 0) {
    // Any id may leave, so every record is read; those of rows in memory
    // are the stale copies above.
    std::unique_ptr<RowStore::Iterator> it = store_->NewIterator(table_);
    for (; it->Valid(); it->Next()) {
      if (memory_.Find(it->id()) || !leaving(it->id())) continue;
      taken.Add(it->id(), it->data(), it->last_touched(), it->updates());
      erase.push_back({it->id(), it->last_touched()});
      ++from_disk;
    }
    PSTRAIN_RETURN_IF_ERROR(it->status().WithContext(
        fmt::format("embedding table '{}': taking rows to move", options_.name)));
  }
  if (!erase.empty())
    PSTRAIN_RETURN_IF_ERROR(store_->Write(table_, RowBatch(spilled_.floats), erase));
  memory_.Remove(from_memory);
  disk_rows_ -= from_disk;
  ForgetLeavingGone();
  return taken;
}

Status TieredTable::ForEachDiskBatch(size_t max_rows,
                                     const std::function<Status(RowBatch batch)>& fn) const {
  if (disk_rows_ == 0) return Status::OK();
  RowBatch batch(spilled_.floats);
  std::unique_ptr<RowStore::Iterator> it = store_->NewIterator(table_);
  for (; it->Valid(); it->Next()) {
    if (memory_.Find(it->id())) continue;  // memory's row is current; a disk copy is old
    batch.Add(it->id(), it->data(), it->last_touched(), it->updates());
    if (batch.size() < max_rows) continue;
    PSTRAIN_RETURN_IF_ERROR(fn(std::exchange(batch, RowBatch(spilled_.floats))));
  }
  PSTRAIN_RETURN_IF_ERROR(it->status().WithContext(
      fmt::format("embedding table '{}': reading the rows on disk", options_.name)));
  return batch.empty() ? Status::OK() : fn(std::move(batch));
}

Status TieredTable::CheckNewRows(const RowBatch& rows) {
  PSTRAIN_RETURN_IF_ERROR(memory_.CheckNewRows(rows));
  FinishWrite();
  if (rows.empty() || disk_rows_ == 0) return Status::OK();
  // A stale copy belongs to a row in memory, which memory's check refused:
  // any record found is a row here.
  RowBatch found(rows.floats);
  PSTRAIN_RETURN_IF_ERROR(store_->MultiGet(table_, rows.ids.data(), rows.size(), &found));
  if (!found.empty())
    return InvalidArgument(
        fmt::format("embedding table '{}': cannot add {} rows: id {} already has a row here",
                    options_.name, rows.size(), found.ids[0]));
  return Status::OK();
}

Status TieredTable::PutRows(const RowBatch& rows) {
  PSTRAIN_RETURN_IF_ERROR(CheckNewRows(rows));
  return PutCheckedRows(rows);
}

Status TieredTable::PutCheckedRows(const RowBatch& rows) {
  if (rows.empty()) return Status::OK();
  // What goes to disk: the `over` least recently touched of the rows here
  // (least recent first) and the rows added (by step), as MergeRows would
  // order them (ties: the rows here less recent), so that memory never
  // holds more than its budget.
  const int64_t over = static_cast<int64_t>(memory_.rows() + rows.size()) - budget_rows_;
  std::vector<int64_t> out_of_memory;
  std::vector<bool> added_out(rows.size(), false);
  if (over > 0) {
    std::vector<size_t> by_step(rows.size());
    std::iota(by_step.begin(), by_step.end(), size_t{0});
    std::stable_sort(by_step.begin(), by_step.end(), [&](size_t a, size_t b) {
      return rows.last_touched[a] < rows.last_touched[b];
    });
    const std::vector<int64_t> back =
        memory_.BackIds(static_cast<size_t>(over), [](int64_t) { return false; });
    size_t b = 0, k = 0;
    for (int64_t left = over; left > 0; --left) {
      const bool here =
          b < back.size() && (k == by_step.size() ||
                              memory_.Find(back[b])->last_touched <= rows.last_touched[by_step[k]]);
      if (here) {
        out_of_memory.push_back(back[b++]);
      } else {
        added_out[by_step[k++]] = true;
      }
    }
  }
  RowBatch spill(rows.floats), stay(rows.floats);
  memory_.CopyRows(out_of_memory, &spill);
  for (size_t i = 0; i < rows.size(); ++i)
    (added_out[i] ? spill : stay)
        .Add(rows.ids[i], rows.row(i), rows.last_touched[i], rows.updates[i]);
  // The rows here that leave overwrite their stale copies, if any; the rows
  // added have none (checked above).
  if (!spill.empty()) PSTRAIN_RETURN_IF_ERROR(store_->Write(table_, spill, no_erasures_));
  memory_.Remove(out_of_memory);
  memory_.MergeRows(stay);
  disk_rows_ += static_cast<int64_t>(spill.size());
  moved_.spilled += static_cast<int64_t>(spill.size());
  ForgetLeavingGone();
  return Status::OK();
}

}  // namespace pstrain
