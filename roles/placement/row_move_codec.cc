#include "roles/placement/row_move_codec.h"

#include <fmt/format.h>

#include <cassert>
#include <cstring>
#include <set>

#include "src/common/byte_reader.h"

namespace pstrain {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the format is little-endian and written with memcpy");

constexpr char kMagic[4] = {'P', 'S', 'R', 'M'};
constexpr uint32_t kFormat = 2;
constexpr uint32_t kMaxTables = 4096;
constexpr uint32_t kMaxName = 256;
constexpr uint32_t kMaxSlots = 8;
// Per table besides its rows: name size, dim, slots, table updates, rows,
// gone.
constexpr size_t kTableHeaderBytes = 4 + 4 + 4 + 8 + 8 + 8;

template <typename T>
void Put(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// An empty column's data() may be null, which memcpy must not be given
// even for 0 bytes: empty columns copy nothing.
template <typename T>
void PutColumn(std::string* out, const std::vector<T>& column) {
  if (!column.empty())
    out->append(reinterpret_cast<const char*>(column.data()), column.size() * sizeof(T));
}

// n values of a column, which the caller checked are there.
template <typename T>
void GetColumn(ByteReader& in, size_t n, std::vector<T>* column) {
  column->resize(n);
  if (n > 0) in.Bytes(column->data(), n * sizeof(T));
}

}  // namespace

void EncodeMovedRows(const std::vector<MovedRows>& tables, std::string* out) {
  size_t size = sizeof(kMagic) + 4 + 4;
  for (const MovedRows& t : tables)
    size += kTableHeaderBytes + t.table.size() + t.rows.size() * 3 * sizeof(int64_t) +
            t.rows.data.size() * sizeof(float) + t.gone.size() * sizeof(int64_t);
  out->reserve(out->size() + size);
  out->append(kMagic, sizeof(kMagic));
  Put(out, kFormat);
  Put(out, static_cast<uint32_t>(tables.size()));
  for (const MovedRows& t : tables) {
    const RowBatch& rows = t.rows;
    assert(rows.floats == size_t{t.dim} * (1 + size_t{t.slots}));
    assert(rows.data.size() == rows.size() * rows.floats);
    assert(rows.last_touched.size() == rows.size() && rows.updates.size() == rows.size());
    Put(out, static_cast<uint32_t>(t.table.size()));
    out->append(t.table);
    Put(out, t.dim);
    Put(out, t.slots);
    Put(out, t.table_updates);
    Put(out, static_cast<uint64_t>(rows.size()));
    PutColumn(out, rows.ids);
    PutColumn(out, rows.last_touched);
    PutColumn(out, rows.updates);
    PutColumn(out, rows.data);
    Put(out, static_cast<uint64_t>(t.gone.size()));
    PutColumn(out, t.gone);
  }
}

StatusOr<std::vector<MovedRows>> DecodeMovedRows(const void* data, size_t size) {
  const auto bad = [&](const std::string& what) {
    return InvalidArgument(fmt::format("moved table rows ({} bytes): {}", size, what));
  };
  ByteReader in(data, size);
  char magic[4];
  uint32_t format = 0, count = 0;
  if (!in.Bytes(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(magic)) != 0)
    return bad("no PSRM header");
  if (!in.Get(&format) || format != kFormat)
    return bad(fmt::format("format {}, this build reads {}", format, kFormat));
  if (!in.Get(&count) || count > kMaxTables)
    return bad(fmt::format("no count of tables from 0 to {}", kMaxTables));
  // Every table takes its header at least: whole before anything is taken.
  if (in.left() < size_t{count} * (kTableHeaderBytes + 1))
    return bad(fmt::format("{} tables do not fit {} bytes", count, in.left()));
  std::vector<MovedRows> tables(count);
  std::set<std::string> names;
  for (uint32_t k = 0; k < count; ++k) {
    MovedRows& t = tables[k];
    uint32_t name_size = 0;
    if (!in.Get(&name_size) || name_size == 0 || name_size > kMaxName || name_size > in.left())
      return bad(
          fmt::format("table {} of {} has no name of 1 to {} bytes", k + 1, count, kMaxName));
    t.table.assign(reinterpret_cast<const char*>(in.at()), name_size);
    in.Skip(name_size);
    // Names go into log lines: plain text only.
    for (char c : t.table)
      if (c < '!' || c > '~')
        return bad(fmt::format("table {} of {} has a name that is not plain text", k + 1, count));
    const auto bad_table = [&](const std::string& what) {
      return bad(fmt::format("table '{}': {}", t.table, what));
    };
    if (!names.insert(t.table).second) return bad_table("twice in one message");
    uint64_t rows = 0;
    if (!in.Get(&t.dim) || !in.Get(&t.slots) || !in.Get(&t.table_updates) || !in.Get(&rows))
      return bad_table("cut short");
    if (t.dim == 0) return bad_table("dim 0");
    if (t.table_updates < 0) return bad_table(fmt::format("{} table updates", t.table_updates));
    if (t.slots > kMaxSlots)
      return bad_table(fmt::format("{} optimizer slots, at most {}", t.slots, kMaxSlots));
    const size_t floats = size_t{t.dim} * (1 + size_t{t.slots});
    const size_t row_bytes = 3 * sizeof(int64_t) + floats * sizeof(float);
    if (rows > in.left() / row_bytes)
      return bad_table(
          fmt::format("{} rows of {} bytes do not fit {} bytes", rows, row_bytes, in.left()));
    const auto n = static_cast<size_t>(rows);
    t.rows = RowBatch(floats);
    GetColumn(in, n, &t.rows.ids);
    GetColumn(in, n, &t.rows.last_touched);
    GetColumn(in, n, &t.rows.updates);
    GetColumn(in, n * floats, &t.rows.data);
    for (size_t i = 0; i < n; ++i) {
      if (t.rows.ids[i] < 0) return bad_table(fmt::format("a negative id {}", t.rows.ids[i]));
      if (t.rows.last_touched[i] < 0 || t.rows.updates[i] < 0)
        return bad_table(fmt::format("row {} has a negative step or update count", t.rows.ids[i]));
    }
    uint64_t gone = 0;
    if (!in.Get(&gone)) return bad_table("cut short");
    if (gone > in.left() / sizeof(int64_t))
      return bad_table(fmt::format("{} gone ids do not fit {} bytes", gone, in.left()));
    GetColumn(in, static_cast<size_t>(gone), &t.gone);
    for (int64_t id : t.gone)
      if (id < 0) return bad_table(fmt::format("a negative gone id {}", id));
  }
  if (in.left() != 0) return bad(fmt::format("{} bytes after its end", in.left()));
  return tables;
}

}  // namespace pstrain
