#include "roles/server/table_rows.h"

#include <fmt/format.h>

namespace pstrain {

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

std::string ServerRows::DescribeTiers() const {
  if (!tiered_) return "";
  const TieredTableCounters c = tiered_->tier_counters();
  return fmt::format(" ({} in memory, budget {}; {} on disk; {} spilled, {} read back so far)",
                     c.resident, tiered_->budget_rows(), c.on_disk, c.spilled, c.fetched);
}

}  // namespace pstrain
