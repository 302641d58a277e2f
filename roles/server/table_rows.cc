#include "roles/server/table_rows.h"

#include <fmt/format.h>

#include <cstring>

#include "embedding/id_map.h"
#include "src/common/random.h"

namespace pstrain {
namespace {

// A row's hash for RowsDigest: SplitMix64's mix over the row's 64-bit
// words (two floats' bit patterns per word), seeded by the id. Summed over
// rows, so each row's hash must be mixed well on its own.
class RowHasher {
 public:
  explicit RowHasher(int64_t id) : h_(Mix64(static_cast<uint64_t>(id))) {}
  void Add(uint64_t word) { h_ = Mix64(h_ ^ word); }
  void AddFloats(const float* f, size_t n) {
    uint32_t bits[2];
    for (size_t i = 0; i + 1 < n; i += 2) {
      std::memcpy(bits, f + i, sizeof(bits));
      Add(bits[0] | static_cast<uint64_t>(bits[1]) << 32);
    }
    if (n % 2 == 1) {
      std::memcpy(bits, f + n - 1, sizeof(float));
      Add(bits[0]);
    }
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_;
};

uint64_t HashRow(int64_t id, const SparseTable::RowView& row, size_t dim, size_t slot_floats) {
  RowHasher h(id);
  h.AddFloats(row.values, dim);
  h.AddFloats(row.slots, slot_floats);
  h.Add(static_cast<uint64_t>(row.last_touched));
  h.Add(static_cast<uint64_t>(row.updates));
  return h.value();
}

}  // namespace

StatusOr<ServerRows> ServerRows::Create(const ServerTable& table, RowStore* store) {
  if (table.memory_rows == 0) {
    auto memory = SparseTable::Create(table.options);
    if (!memory.ok()) return memory.status();
    return ServerRows(std::move(*memory));
  }
  auto tiered = TieredTable::Create(table.options, table.memory_rows, store);
  if (!tiered.ok()) return tiered.status();
  return ServerRows(std::move(*tiered));
}

StatusOr<ServerRows> ServerRows::Deserialize(const ServerTable& table, RowStore* store, bool tiered,
                                             const std::string& bytes) {
  const bool wants_tiered = table.memory_rows > 0;
  if (tiered && !wants_tiered)
    return FailedPrecondition(fmt::format(
        "table '{}': the checkpoint keeps some of its rows on disk, and this config sets no "
        "memory budget for it; to resume with every row in memory, set server_cache_rows to at "
        "least the table's rows on a server",
        table.options.name));
  if (!tiered && wants_tiered) {
    auto moved = TieredTable::FromSparseTable(table.options, table.memory_rows, store, bytes.data(),
                                              bytes.size());
    if (!moved.ok()) return moved.status();
    return ServerRows(std::move(*moved));
  }
  if (!tiered) {
    auto memory = SparseTable::Deserialize(table.options, bytes.data(), bytes.size());
    if (!memory.ok()) return memory.status();
    return ServerRows(std::move(*memory));
  }
  auto restored =
      TieredTable::Deserialize(table.options, table.memory_rows, store, bytes.data(), bytes.size());
  if (!restored.ok()) return restored.status();
  return ServerRows(std::move(*restored));
}

StatusOr<ServerRows> ServerRows::ReplicaFrom(const ServerTable& table, RowStore* store,
                                             const std::string& bytes, int64_t* disk_rows_to_come) {
  *disk_rows_to_come = 0;
  if (table.memory_rows == 0) return Deserialize(table, store, /*tiered=*/false, bytes);
  auto header = TieredTable::ReadSerializedHeader(table.options.name, bytes.data(), bytes.size());
  if (!header.ok()) return header.status();
  if (header->disk_rows < 0)
    return InvalidArgument(
        fmt::format("table '{}': {} rows on disk", table.options.name, header->disk_rows));
  // The rows in memory, in a new table: those on disk come after.
  auto tiered =
      TieredTable::FromSparseTable(table.options, table.memory_rows, store,
                                   bytes.data() + header->rows_at, bytes.size() - header->rows_at);
  if (!tiered.ok()) return tiered.status();
  *disk_rows_to_come = header->disk_rows;
  return ServerRows(std::move(*tiered));
}

Status ServerRows::ForEachDiskBatch(size_t max_rows,
                                    const std::function<Status(RowBatch batch)>& fn) const {
  return tiered_ ? tiered_->ForEachDiskBatch(max_rows, fn) : Status::OK();
}

Status ServerRows::Lookup(const int64_t* ids, size_t n, float* out, int64_t step) {
  return tiered_ ? tiered_->Lookup(ids, n, out, step) : memory_->Lookup(ids, n, out, step);
}

Status ServerRows::ApplyGradients(const int64_t* ids, const float* grads, size_t n, int64_t step) {
  return tiered_ ? tiered_->ApplyGradients(ids, grads, n, step)
                 : memory_->ApplyGradients(ids, grads, n, step);
}

StatusOr<int64_t> ServerRows::EvictUntouched(int64_t step) {
  if (tiered_) return tiered_->EvictUntouched(step);
  return memory_->EvictUntouched(step);
}

Status ServerRows::CheckId(int64_t id) const {
  return tiered_ ? tiered_->CheckId(id) : memory_->CheckId(id);
}

void ServerRows::Serialize(std::string* out) const {
  if (tiered_) {
    tiered_->Serialize(out);
  } else {
    memory_->Serialize(out);
  }
}

const EmbeddingTableOptions& ServerRows::options() const {
  return tiered_ ? tiered_->options() : memory_->options();
}

EmbeddingTableCounters ServerRows::counters() const {
  return tiered_ ? tiered_->counters() : memory_->counters();
}

int64_t ServerRows::table_updates() const {
  return tiered_ ? tiered_->table_updates() : memory_->table_updates();
}

void ServerRows::CatchUpSchedule(int64_t pushes) {
  if (tiered_) return tiered_->CatchUpSchedule(pushes);
  memory_->CatchUpSchedule(pushes);
}

std::string ServerRows::DescribeTiers() const {
  if (!tiered_) return "";
  const TieredTableCounters c = tiered_->tier_counters();
  return fmt::format(" ({} in memory, budget {}; {} on disk; {} spilled, {} read back so far)",
                     c.resident, tiered_->budget_rows(), c.on_disk, c.spilled, c.fetched);
}

StatusOr<RowBatch> ServerRows::TakeRows(const std::function<bool(int64_t)>& leaving) {
  if (tiered_) return tiered_->TakeRows(leaving);
  RowBatch taken = *CopyRows(leaving);
  memory_->Remove(taken.ids);
  return taken;
}

std::optional<RowBatch> ServerRows::CopyRows(const std::function<bool(int64_t)>& leaving) const {
  if (tiered_) return std::nullopt;
  std::vector<int64_t> ids;
  for (int64_t id : memory_->Ids())
    if (leaving(id)) ids.push_back(id);
  const auto dim = static_cast<size_t>(memory_->options().dim);
  RowBatch copied(dim * (1 + static_cast<size_t>(memory_->optimizer().num_slots())));
  memory_->CopyRows(ids, &copied);
  return copied;
}

Status ServerRows::RemoveRows(const std::vector<int64_t>& ids) {
  if (tiered_) {
    FlatIdMap<uint8_t> drop;
    for (int64_t id : ids) drop.Insert(id, 1);
    return tiered_->TakeRows([&](int64_t id) { return drop.Find(id) != nullptr; }).status();
  }
  std::vector<int64_t> here;
  for (int64_t id : ids)
    if (memory_->Find(id)) here.push_back(id);
  memory_->Remove(here);
  return Status::OK();
}

Status ServerRows::CheckNewRows(const RowBatch& rows) {
  return tiered_ ? tiered_->CheckNewRows(rows) : memory_->CheckNewRows(rows);
}

Status ServerRows::PutRows(const RowBatch& rows) {
  PSTRAIN_RETURN_IF_ERROR(CheckNewRows(rows));
  return PutCheckedRows(rows);
}

Status ServerRows::PutCheckedRows(const RowBatch& rows) {
  if (tiered_) return tiered_->PutCheckedRows(rows);
  memory_->MergeRows(rows);
  return Status::OK();
}

StatusOr<RowsDigest> ServerRows::Digest() const {
  const auto dim = static_cast<size_t>(options().dim);
  const size_t slot_floats = dim * static_cast<size_t>(tiered_ ? tiered_->optimizer().num_slots()
                                                               : memory_->optimizer().num_slots());
  RowsDigest digest;
  const auto add = [&](int64_t id, const SparseTable::RowView& row) {
    ++digest.rows;
    digest.sum += HashRow(id, row, dim, slot_floats);
    digest.updates += row.updates;
  };
  if (tiered_) {
    PSTRAIN_RETURN_IF_ERROR(tiered_->ForEachRow([&](int64_t id, const SparseTable::RowView& row) {
      add(id, row);
      return Status::OK();
    }));
  } else {
    for (int64_t id : memory_->Ids()) add(id, *memory_->Find(id));
  }
  return digest;
}

StatusOr<std::optional<TieredTable::Row>> ServerRows::Find(int64_t id) const {
  if (tiered_) return tiered_->Find(id);
  const std::optional<SparseTable::RowView> view = memory_->Find(id);
  if (!view) return std::optional<TieredTable::Row>();
  const auto dim = static_cast<size_t>(memory_->options().dim);
  const size_t slots = dim * static_cast<size_t>(memory_->optimizer().num_slots());
  return std::optional<TieredTable::Row>(TieredTable::Row{{view->values, view->values + dim},
                                                          {view->slots, view->slots + slots},
                                                          view->last_touched,
                                                          view->updates});
}

}  // namespace pstrain
