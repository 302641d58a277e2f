// SparseTable::Serialize and Deserialize. Format, all integers little-endian
// and fixed width:
//   "PSEMBTBL"              8 bytes, magic
//   version                 u32 (2; 1 is still read)
//   name length, name       u32, bytes
//   dim, slots, optimizer   u32 each (slots = optimizer state floats per element)
//   clock, table_updates    i64 each
//   row count               u64
//   per row                 id i64, last_touched i64, updates i64,
//                           (1 + slots) * dim f32: values, then slot 0, slot 1
//   version 2 only:
//   recency                 row count u32: the rows' places above, most
//                           recently touched first
//   pending count           u64: ids seen but not yet admitted (admit_after)
//   per pending id          id i64, sightings u32; ascending ids
//   CRC-32                  u32, zlib crc32 of every byte before it
// Rows are written in arena order and come back in it. Recency and the
// pending sightings make a restored table evict and admit exactly as the
// table it was saved from would have (version 1 rebuilt recency from
// last_touched, so ties could evict another row, and forgot the sightings).
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "embedding/sparse_table.h"
#include "src/common/byte_reader.h"

namespace pstrain {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the format is little-endian and written with memcpy");

constexpr char kMagic[8] = {'P', 'S', 'E', 'M', 'B', 'T', 'B', 'L'};
constexpr uint32_t kVersion = 2;

uint32_t Crc32(const char* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (size > 0) {  // crc32 takes a 32-bit length
    const auto chunk = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

template <typename T>
void Put(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// The fields before the rows.
struct Header {
  uint32_t version, dim, slots, type;
  int64_t clock, table_updates;
  uint64_t rows;
};

// Checks the magic, the CRC, the version and that the bytes hold table
// `name`, and reads the header; *in is left at the first row. Errors say
// what is wrong, for the caller to put after the table's name.
Status ReadHeader(const char* bytes, size_t size, const std::string& name, Header* header,
                  ByteReader* in) {
  if (size < sizeof(kMagic) + sizeof(uint32_t) || std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0)
    return InvalidArgument("not a serialized table (bad magic or too short)");
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes + size - sizeof(stored_crc), sizeof(stored_crc));
  const uint32_t crc = Crc32(bytes, size - sizeof(stored_crc));
  if (crc != stored_crc)
    return InvalidArgument(
        fmt::format("checksum mismatch (stored {:#010x}, contents {:#010x})", stored_crc, crc));
  *in = ByteReader(bytes + sizeof(kMagic), size - sizeof(kMagic) - sizeof(stored_crc));
  uint32_t name_size;
  if (!in->Get(&header->version) || header->version < 1 || header->version > kVersion)
    return InvalidArgument("unsupported version");
  if (!in->Get(&name_size) || name_size > in->left()) return InvalidArgument("truncated name");
  const std::string held(reinterpret_cast<const char*>(in->at()), name_size);
  in->Skip(name_size);
  if (held != name) return InvalidArgument(fmt::format("it holds table '{}'", held));
  if (!in->Get(&header->dim) || !in->Get(&header->slots) || !in->Get(&header->type) ||
      !in->Get(&header->clock) || !in->Get(&header->table_updates) || !in->Get(&header->rows))
    return InvalidArgument("truncated header");
  return Status::OK();
}

}  // namespace

void SparseTable::Serialize(std::string* out) const {
  const size_t start = out->size();
  out->append(kMagic, sizeof(kMagic));
  Put(out, kVersion);
  Put(out, static_cast<uint32_t>(options_.name.size()));
  out->append(options_.name);
  Put(out, static_cast<uint32_t>(options_.dim));
  Put(out, static_cast<uint32_t>(optimizer_.num_slots()));
  Put(out, static_cast<uint32_t>(options_.optimizer.type));
  Put(out, clock_);
  Put(out, table_updates_);
  Put(out, static_cast<uint64_t>(meta_.size()));
  out->reserve(out->size() + meta_.size() * (24 + stride_ * sizeof(float)) + 4);
  for (uint32_t row = 0; row < meta_.size(); ++row) {
    Put(out, meta_[row].id);
    Put(out, meta_[row].last_touched);
    Put(out, meta_[row].updates);
    out->append(reinterpret_cast<const char*>(RowData(row)), stride_ * sizeof(float));
  }
  for (uint32_t row = lru_.front(); row != kNone; row = meta_[row].next) Put(out, row);
  std::vector<std::pair<int64_t, uint32_t>> pending;
  pending.reserve(sightings_.size());
  const_cast<FlatIdMap<uint32_t>&>(sightings_).ForEach([&](int64_t id, uint32_t& count) {
    pending.emplace_back(id, count);
  });
  std::sort(pending.begin(), pending.end());  // the same bytes for the same table
  Put(out, static_cast<uint64_t>(pending.size()));
  for (const auto& [id, count] : pending) {
    Put(out, id);
    Put(out, count);
  }
  Put(out, Crc32(out->data() + start, out->size() - start));
}

StatusOr<SparseTable> SparseTable::Deserialize(const EmbeddingTableOptions& options,
                                               const void* data, size_t size) {
  PSTRAIN_RETURN_IF_ERROR(options.Validate());
  const auto bad = [&](const std::string& what) {
    return InvalidArgument(
        fmt::format("embedding table '{}': cannot restore: {}", options.name, what));
  };
  Header header;
  ByteReader in(nullptr, 0);
  Status read = ReadHeader(static_cast<const char*>(data), size, options.name, &header, &in);
  if (!read.ok()) return bad(read.message());
  SparseTable table(options);
  const uint32_t version = header.version, dim = header.dim, slots = header.slots,
                 type = header.type;
  const uint64_t rows = header.rows;
  table.clock_ = header.clock;
  table.table_updates_ = header.table_updates;
  if (dim != static_cast<uint32_t>(options.dim) ||
      slots != static_cast<uint32_t>(table.optimizer_.num_slots()) ||
      type != static_cast<uint32_t>(options.optimizer.type)) {
    return bad(fmt::format("it has dim {} and optimizer type {} with {} slots; expected dim {}",
                           dim, type, slots, options.dim));
  }
  const size_t row_bytes = 3 * sizeof(int64_t) + table.stride_ * sizeof(float);
  // Version 2 adds a u32 of recency per row and the pending count after them.
  const size_t per_row = row_bytes + (version >= 2 ? sizeof(uint32_t) : 0);
  const size_t tail = version >= 2 ? sizeof(uint64_t) : 0;
  const bool fits = version >= 2 ? in.left() >= tail && rows <= (in.left() - tail) / per_row
                                 : rows == in.left() / row_bytes && in.left() % row_bytes == 0;
  if (!fits || rows >= kNone) {
    return bad(fmt::format("{} rows of {} bytes do not fit {} bytes", rows, row_bytes, in.left()));
  }
  table.meta_.resize(rows);
  table.arena_.Resize(rows);
  table.index_.Reserve(rows);
  for (uint32_t row = 0; row < rows; ++row) {
    RowMeta& meta = table.meta_[row];
    in.Get(&meta.id);
    in.Get(&meta.last_touched);
    in.Get(&meta.updates);
    in.Bytes(table.RowData(row), table.stride_ * sizeof(float));
    PSTRAIN_RETURN_IF_ERROR(table.CheckId(meta.id).WithContext("cannot restore"));
    if (meta.updates < 0) return bad(fmt::format("row {} has a negative update count", meta.id));
    if (!table.index_.Insert(meta.id, row).second) return bad(fmt::format("row {} twice", meta.id));
    table.clock_ = std::max(table.clock_, meta.last_touched);
  }
  // Recency, most recent first: as saved (version 2), or rebuilt from
  // last_touched with ties in arena order (version 1).
  std::vector<uint32_t> order(rows);
  if (version >= 2) {
    std::vector<bool> seen(rows, false);
    for (uint32_t& row : order) {
      in.Get(&row);
      if (row >= rows || seen[row]) return bad("the recency order is not one of the rows");
      seen[row] = true;
    }
    std::reverse(order.begin(), order.end());  // pushed to the front: least recent first
  } else {
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return table.meta_[a].last_touched < table.meta_[b].last_touched;
    });
  }
  for (uint32_t row : order) table.lru_.PushFront(table.meta_, row);
  uint64_t pending = 0;
  if (version >= 2) {
    constexpr size_t kPendingBytes = sizeof(int64_t) + sizeof(uint32_t);
    if (!in.Get(&pending) || pending != in.left() / kPendingBytes ||
        in.left() % kPendingBytes != 0 ||
        pending > static_cast<uint64_t>(std::max<int64_t>(options.max_pending_ids, 0)))
      return bad(fmt::format("{} pending ids do not fit {} bytes (at most {})", pending, in.left(),
                             options.max_pending_ids));
    table.sightings_.Reserve(pending);
    for (uint64_t i = 0; i < pending; ++i) {
      int64_t id;
      uint32_t count;
      in.Get(&id);
      in.Get(&count);
      PSTRAIN_RETURN_IF_ERROR(table.CheckId(id).WithContext("cannot restore"));
      if (table.index_.Find(id) != nullptr || !table.sightings_.Insert(id, count).second)
        return bad(fmt::format("pending id {} is a row or listed twice", id));
    }
  }
  while (table.meta_.size() > table.row_limit_) {
    table.RemoveRow(table.lru_.back());
    ++table.counters_.evictions;
    ++table.counters_.capacity_evictions;
  }
  return table;
}

StatusOr<SparseTable::SerializedRows> SparseTable::ReadSerializedRows(const std::string& name,
                                                                      const void* data,
                                                                      size_t size) {
  const auto bad = [&](const std::string& what) {
    return InvalidArgument(fmt::format("embedding table '{}': cannot read: {}", name, what));
  };
  Header header;
  ByteReader in(nullptr, 0);
  Status read = ReadHeader(static_cast<const char*>(data), size, name, &header, &in);
  if (!read.ok()) return bad(read.message());
  // No optimizer keeps more slots; the bound keeps the row size in range.
  constexpr uint32_t kMaxSlots = 16;
  if (header.dim < 1 || header.slots > kMaxSlots)
    return bad(fmt::format("dim {} with {} slots", header.dim, header.slots));
  const size_t row_bytes =
      3 * sizeof(int64_t) + (1 + size_t{header.slots}) * header.dim * sizeof(float);
  if (header.rows > in.left() / row_bytes)
    return bad(
        fmt::format("{} rows of {} bytes do not fit {} bytes", header.rows, row_bytes, in.left()));
  SerializedRows out;
  out.dim = header.dim;
  out.slots = header.slots;
  out.rows.resize(header.rows);
  for (auto& [id, floats] : out.rows) {
    in.Get(&id);
    in.Skip(2 * sizeof(int64_t));  // last_touched, updates
    floats = in.at();
    in.Skip(row_bytes - 3 * sizeof(int64_t));
  }
  return out;
}

StatusOr<SparseTable> SparseTable::Gather(const EmbeddingTableOptions& options,
                                          const std::vector<SparseTable>& shards,
                                          const std::function<bool(int64_t)>& keep) {
  PSTRAIN_RETURN_IF_ERROR(options.Validate());
  SparseTable table(options);
  // The kept rows, each shard's least recent first, then by last-touched
  // step (stable: ties keep shard order).
  struct Kept {
    const SparseTable* shard;
    uint32_t row;
    int64_t last_touched;
  };
  std::vector<Kept> kept;
  for (const SparseTable& shard : shards) {
    if (shard.stride_ != table.stride_)
      return InvalidArgument(
          fmt::format("embedding table '{}': shards of another row size", options.name));
    table.clock_ = std::max(table.clock_, shard.clock_);
    table.table_updates_ = std::max(table.table_updates_, shard.table_updates_);
    for (uint32_t row = shard.lru_.back(); row != kNone; row = shard.meta_[row].prev)
      if (keep(shard.meta_[row].id)) kept.push_back({&shard, row, shard.meta_[row].last_touched});
  }
  std::stable_sort(kept.begin(), kept.end(),
                   [](const Kept& a, const Kept& b) { return a.last_touched < b.last_touched; });
  if (kept.size() >= kNone)
    return InvalidArgument(fmt::format("embedding table '{}': {} rows", options.name, kept.size()));
  const auto rows = static_cast<uint32_t>(kept.size());
  table.meta_.resize(rows);
  table.arena_.Resize(rows);
  table.index_.Reserve(rows);
  for (uint32_t row = 0; row < rows; ++row) {
    const RowMeta& from = kept[row].shard->meta_[kept[row].row];
    table.meta_[row] = RowMeta{from.id, from.last_touched, from.updates, kNone, kNone};
    std::memcpy(table.RowData(row), kept[row].shard->RowData(kept[row].row),
                table.stride_ * sizeof(float));
    if (!table.index_.Insert(from.id, row).second)
      return InvalidArgument(
          fmt::format("embedding table '{}': row {} in two shards", options.name, from.id));
    table.lru_.PushFront(table.meta_, row);  // least recent first: most recent ends in front
  }
  for (const SparseTable& shard : shards) {
    Status twice;
    const_cast<FlatIdMap<uint32_t>&>(shard.sightings_).ForEach([&](int64_t id, uint32_t& count) {
      if (keep(id) &&
          (table.index_.Find(id) != nullptr || !table.sightings_.Insert(id, count).second))
        twice = InvalidArgument(
            fmt::format("embedding table '{}': pending id {} in two shards", options.name, id));
    });
    PSTRAIN_RETURN_IF_ERROR(twice);
  }
  while (table.meta_.size() > table.row_limit_) {
    table.RemoveRow(table.lru_.back());
    ++table.counters_.evictions;
    ++table.counters_.capacity_evictions;
  }
  return table;
}

}  // namespace pstrain
