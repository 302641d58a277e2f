// TieredTable::Serialize and Deserialize. Format, little-endian, fixed width:
//   "PSTIERED"              8 bytes, magic
//   version                 u32 (1)
//   disk rows               i64: rows in the store's checkpoint
//   CRC-32                  u32, zlib crc32 of the bytes above
//   the rows in memory      SparseTable::Serialize (its own CRC)
// The rows on disk are not here: they are in the store's checkpoint, taken
// with no batch between it and this. Counters start again from a restore,
// as SparseTable's do.
#include <fmt/format.h>
#include <zlib.h>

#include <cstring>

#include "embedding/tiered_table.h"

namespace pstrain {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the format is little-endian and written with memcpy");

constexpr char kMagic[8] = {'P', 'S', 'T', 'I', 'E', 'R', 'E', 'D'};
constexpr uint32_t kVersion = 1;
constexpr size_t kFields = 1;
constexpr size_t kHeaderBytes = sizeof(kMagic) + sizeof(uint32_t) + kFields * sizeof(int64_t);

uint32_t Crc32(const char* data, size_t size) {
  return static_cast<uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(data), static_cast<uInt>(size)));
}

}  // namespace

void TieredTable::Serialize(std::string* out) const {
  const size_t start = out->size();
  out->append(kMagic, sizeof(kMagic));
  out->append(reinterpret_cast<const char*>(&kVersion), sizeof(kVersion));
  const int64_t fields[kFields] = {disk_rows_};
  out->append(reinterpret_cast<const char*>(fields), sizeof(fields));
  const uint32_t crc = Crc32(out->data() + start, kHeaderBytes);
  out->append(reinterpret_cast<const char*>(&crc), sizeof(crc));
  memory_.Serialize(out);
}

StatusOr<TieredTable::SerializedHeader> TieredTable::ReadSerializedHeader(const std::string& name,
                                                                          const void* data,
                                                                          size_t size) {
  const auto bad = [&](const std::string& what) {
    return InvalidArgument(
        fmt::format("embedding table '{}': cannot read the tiered table: {}", name, what));
  };
  const char* bytes = static_cast<const char*>(data);
  if (size < kHeaderBytes + sizeof(uint32_t) || std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0)
    return bad("not a serialized tiered table (bad magic or too short)");
  uint32_t stored_crc, version;
  std::memcpy(&stored_crc, bytes + kHeaderBytes, sizeof(stored_crc));
  if (Crc32(bytes, kHeaderBytes) != stored_crc) return bad("header checksum mismatch");
  std::memcpy(&version, bytes + sizeof(kMagic), sizeof(version));
  if (version != kVersion) return bad(fmt::format("unsupported version {}", version));
  int64_t fields[kFields];
  std::memcpy(fields, bytes + sizeof(kMagic) + sizeof(version), sizeof(fields));
  for (int64_t f : fields)
    if (f < 0) return bad("a negative count");
  return SerializedHeader{fields[0], kHeaderBytes + sizeof(uint32_t)};
}

StatusOr<TieredTable> TieredTable::Deserialize(const EmbeddingTableOptions& options,
                                               int64_t budget_rows, RowStore* store,
                                               const void* data, size_t size, TierPolicy policy) {
  auto header = ReadSerializedHeader(options.name, data, size);
  if (!header.ok()) return header.status();
  const char* bytes = static_cast<const char*>(data);
  auto memory = SparseTable::Deserialize(MemoryOptions(options), bytes + header->rows_at,
                                         size - header->rows_at);
  if (!memory.ok()) return memory.status();
  // An absent table is created empty; rows said to be on disk then are not.
  auto over = Over(options, budget_rows, store, std::move(*memory), policy, false);
  if (!over.ok()) return over.status();
  over->disk_rows_ = header->disk_rows;
  if (over->disk_rows_ > 0) {
    std::unique_ptr<RowStore::Iterator> it = store->NewIterator(over->table_);
    if (!it->Valid()) {
      PSTRAIN_RETURN_IF_ERROR(it->status());
      return InvalidArgument(fmt::format(
          "embedding table '{}': cannot restore the tiered table: {} rows should be on disk, but "
          "store {} has none",
          options.name, header->disk_rows, store->dir()));
    }
  }
  return over;
}

StatusOr<TieredTable> TieredTable::FromSparseTable(const EmbeddingTableOptions& options,
                                                   int64_t budget_rows, RowStore* store,
                                                   const void* data, size_t size,
                                                   TierPolicy policy) {
  auto memory = SparseTable::Deserialize(MemoryOptions(options), data, size);
  if (!memory.ok()) return memory.status();
  auto tiered = Over(options, budget_rows, store, std::move(*memory), policy, true);
  if (!tiered.ok()) return tiered.status();
  PSTRAIN_RETURN_IF_ERROR(tiered->SpillPastBudget());
  return tiered;
}

}  // namespace pstrain
