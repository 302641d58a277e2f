#include "roles/checkpoint/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <queue>

#include "embedding/sparse_table.h"
#include "embedding/tiered_table.h"

namespace pstrain {
namespace {

// Rows a table may count (a hostile count must not overflow the sum).
constexpr int64_t kMaxRows = int64_t{1} << 48;

// The rows of SparseTable::Serialize's bytes, by ascending id, into
// share->memory_*; and share->floats.
Status ListRows(const std::string& name, int64_t want_dim, const uint8_t* table, size_t size,
                CheckpointTable::Share* share) {
  auto read = SparseTable::ReadSerializedRows(name, table, size);
  if (!read.ok()) return read.status();
  if (read->dim != want_dim)
    return InvalidArgument(fmt::format("embedding table '{}': dim {}; the layout says dim {}", name,
                                       read->dim, want_dim));
  std::sort(read->rows.begin(), read->rows.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  share->memory_ids.reserve(read->rows.size());
  share->memory_rows.reserve(read->rows.size());
  for (const auto& [id, row] : read->rows) {
    share->memory_ids.push_back(id);
    share->memory_rows.push_back(row);
  }
  share->floats = (1 + size_t{read->slots}) * read->dim;
  return Status::OK();
}

// One ascending run of rows: a share's rows in memory, or those in its store.
// A run on disk counts its rows against the section's count as it goes.
// A row in memory may also have a copy on disk, older (TieredTable keeps the
// copy of a row read back until the row leaves memory again and overwrites
// it): the disk run passes over those, so memory's wins.
class Run {
 public:
  Run(const CheckpointTable::Share* share, bool disk) : share_(share) {
    if (!disk) return;
    it_ = share->store->NewIterator(share->table);
    SkipResident();
  }
  bool Valid() const { return it_ ? it_->Valid() : next_ < share_->memory_ids.size(); }
  int64_t id() const { return it_ ? it_->id() : share_->memory_ids[next_]; }
  const void* values() const {
    return it_ ? static_cast<const void*>(it_->data()) : share_->memory_rows[next_];
  }
  void Next() {
    if (!it_) {
      ++next_;
      return;
    }
    it_->Next();
    SkipResident();
  }
  // After Valid() or Next(): the store's error, or a count that does not
  // match the section's.
  Status Check(const std::string& table) {
    if (!it_) return Status::OK();
    PSTRAIN_RETURN_IF_ERROR(it_->status().WithContext(share_->path));
    if (it_->Valid()) ++read_;
    if (read_ > share_->disk_rows)
      return InvalidArgument(fmt::format(
          "{}: table '{}': its store checkpoint holds more than the {} rows the shard file says",
          share_->path, table, share_->disk_rows));
    if (!it_->Valid() && read_ != share_->disk_rows)
      return InvalidArgument(
          fmt::format("{}: table '{}': its store checkpoint holds {} rows, the shard file says {}",
                      share_->path, table, read_, share_->disk_rows));
    return Status::OK();
  }

 private:
  // Both ascending: the memory ids below the disk run's are passed for good.
  void SkipResident() {
    const std::vector<int64_t>& held = share_->memory_ids;
    while (it_->Valid()) {
      while (next_ < held.size() && held[next_] < it_->id()) ++next_;
      if (next_ == held.size() || held[next_] != it_->id()) return;
      it_->Next();
    }
  }

  const CheckpointTable::Share* share_;
  size_t next_ = 0;  // memory: the next row; disk: where SkipResident is
  std::unique_ptr<RowStore::Iterator> it_;
  int64_t read_ = 0;
};

}  // namespace

Status CheckpointTable::AddShare(const std::string& path, bool tiered, const uint8_t* bytes,
                                 size_t size, RowStore* store) {
  const auto bad = [&](const std::string& what) {
    return InvalidArgument(fmt::format("{}: table '{}': {}", path, name_, what));
  };
  Share share;
  share.path = path;
  if (tiered) {
    auto header = TieredTable::ReadSerializedHeader(name_, bytes, size);
    if (!header.ok()) return header.status().WithContext(path);
    if (store == nullptr) return bad("rows on disk, but the shard file lists no store");
    share.disk_rows = header->disk_rows;
    bytes += header->rows_at;
    size -= header->rows_at;
  }
  PSTRAIN_RETURN_IF_ERROR(ListRows(name_, dim_, bytes, size, &share).WithContext(path));
  if (tiered) {
    // by_recency false: reading needs only the rows; an absent table (no
    // row was ever spilled) opens empty in the scratch copy.
    auto table = store->OpenTable(name_, share.floats, false, false);
    if (!table.ok()) return table.status().WithContext(path);
    share.store = store;
    share.table = *table;
  }
  const auto held = static_cast<int64_t>(share.memory_ids.size());
  if (share.disk_rows > kMaxRows - held || rows_ > kMaxRows - held - share.disk_rows)
    return bad(fmt::format("more than {} rows in all", kMaxRows));
  rows_ += held + share.disk_rows;
  shares_.push_back(std::move(share));
  return Status::OK();
}

Status CheckpointTable::ForEachRow(
    const std::function<Status(int64_t id, const float* values)>& fn) const {
  // A k-way merge of every share's runs by id: memory for rows held
  // (pointers), disk a run read ahead by the store's iterator.
  std::vector<Run> runs;
  for (const Share& s : shares_) {
    runs.emplace_back(&s, false);
    if (s.store != nullptr) runs.emplace_back(&s, true);
  }
  using Head = std::pair<int64_t, size_t>;  // id, run
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  for (size_t r = 0; r < runs.size(); ++r) {
    PSTRAIN_RETURN_IF_ERROR(runs[r].Check(name_));
    if (runs[r].Valid()) heads.emplace(runs[r].id(), r);
  }
  std::vector<float> row(static_cast<size_t>(dim_));  // aligned, for fn
  int64_t previous = 0, emitted = 0;
  while (!heads.empty()) {
    const auto [id, r] = heads.top();
    heads.pop();
    if (emitted > 0 && id == previous)
      return InvalidArgument(fmt::format("table '{}' holds row {} twice", name_, id));
    std::memcpy(row.data(), runs[r].values(), row.size() * sizeof(float));
    PSTRAIN_RETURN_IF_ERROR(fn(id, row.data()));
    previous = id;
    ++emitted;
    runs[r].Next();
    PSTRAIN_RETURN_IF_ERROR(runs[r].Check(name_));
    if (runs[r].Valid()) heads.emplace(runs[r].id(), r);
  }
  return Status::OK();
}

Status CheckpointTable::Gather(const int64_t* ids, size_t n, float* out,
                               std::vector<char>* found) const {
  found->assign(n, 0);
  const size_t row_bytes = static_cast<size_t>(dim_) * sizeof(float);
  // (id, index) of the ids not found yet, ascending.
  std::vector<std::pair<int64_t, size_t>> missing(n);
  for (size_t i = 0; i < n; ++i) missing[i] = {ids[i], i};
  std::sort(missing.begin(), missing.end());
  const auto take = [&](size_t i, const void* values) {
    std::memcpy(out + i * dim_, values, row_bytes);
    (*found)[i] = 1;
  };
  for (const Share& s : shares_) {
    for (const auto& [id, i] : missing) {
      auto at = std::lower_bound(s.memory_ids.begin(), s.memory_ids.end(), id);
      if (at != s.memory_ids.end() && *at == id) take(i, s.memory_rows[at - s.memory_ids.begin()]);
    }
  }
  missing.erase(std::remove_if(missing.begin(), missing.end(),
                               [&](const auto& m) { return (*found)[m.second] != 0; }),
                missing.end());
  std::vector<int64_t> ask;
  for (const Share& s : shares_) {
    if (s.store == nullptr || s.disk_rows == 0 || missing.empty()) continue;
    ask.clear();
    // A store holds ids >= 0 only (its keys sort as unsigned).
    for (const auto& m : missing)
      if (m.first >= 0) ask.push_back(m.first);
    RowBatch rows(s.floats);
    PSTRAIN_RETURN_IF_ERROR(s.store->MultiGet(s.table, ask.data(), ask.size(), &rows));
    for (size_t k = 0; k < rows.size(); ++k) {
      auto at =
          std::lower_bound(missing.begin(), missing.end(), std::make_pair(rows.ids[k], size_t{0}));
      if (at != missing.end() && at->first == rows.ids[k]) take(at->second, rows.row(k));
    }
  }
  return Status::OK();
}

}  // namespace pstrain
