#include "roles/server/table_replica_codec.h"

#include <fmt/format.h>

#include <cstring>

#include "roles/server/handoff_codec.h"
#include "src/common/byte_reader.h"

namespace pstrain {
namespace {

constexpr char kMagic[4] = {'P', 'S', 'R', 'T'};
constexpr uint32_t kFormat = 1;

template <typename T>
void Append(std::vector<uint8_t>* out, const T& v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));
}

void AppendBytes(std::vector<uint8_t>* out, const void* data, size_t n) {
  const size_t at = out->size();
  out->resize(at + n);
  if (n > 0) std::memcpy(out->data() + at, data, n);
}

}  // namespace

std::vector<uint8_t> EncodeTableState(const UpdateCore::State& core, const std::string& rows) {
  const std::vector<uint8_t> core_bytes = EncodeCoreState(core);
  std::vector<uint8_t> out;
  out.reserve(4 + 4 + 4 + core_bytes.size() + rows.size());
  AppendBytes(&out, kMagic, 4);
  Append(&out, kFormat);
  Append(&out, static_cast<uint32_t>(core_bytes.size()));
  AppendBytes(&out, core_bytes.data(), core_bytes.size());
  AppendBytes(&out, rows.data(), rows.size());
  return out;
}

StatusOr<TableState> DecodeTableState(const uint8_t* data, size_t size, const std::string& table) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument(
        fmt::format("the state of table '{}' ({} bytes): {}", table, size, what));
  };
  ByteReader in(data, size);
  char magic[4];
  uint32_t format = 0, core_size = 0;
  if (!in.Bytes(magic, 4) || std::memcmp(magic, kMagic, 4) != 0) return bad("no PSRT header");
  if (!in.Get(&format) || format != kFormat)
    return bad(fmt::format("format {}, this build reads {}", format, kFormat));
  if (!in.Get(&core_size) || core_size > in.left()) return bad("cut short in its update state");
  auto core = DecodeCoreState(in.at(), core_size);
  if (!core.ok()) return bad(core.status().message());
  in.Skip(core_size);
  return TableState{std::move(*core),
                    std::string(reinterpret_cast<const char*>(in.at()), in.left())};
}

std::vector<uint8_t> EncodeTableChange(TableOp op, int64_t step, const int64_t* ids, size_t n,
                                       const float* grads, int dim) {
  const size_t floats = op == TableOp::kApply ? n * static_cast<size_t>(dim) : 0;
  std::vector<uint8_t> out;
  out.reserve(1 + 8 + 8 + n * sizeof(int64_t) + floats * sizeof(float));
  Append(&out, static_cast<uint8_t>(op));
  Append(&out, step);
  Append(&out, static_cast<uint64_t>(n));
  AppendBytes(&out, ids, n * sizeof(int64_t));
  AppendBytes(&out, grads, floats * sizeof(float));
  return out;
}

StatusOr<TableChange> DecodeTableChange(const uint8_t* data, size_t size, const std::string& table,
                                        int dim, int64_t max_ids) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument(fmt::format("a change of table '{}' ({} bytes): {}", table, size, what));
  };
  ByteReader in(data, size);
  uint8_t op = 0;
  uint64_t n = 0;
  TableChange change;
  if (!in.Get(&op) || op > static_cast<uint8_t>(TableOp::kEvict)) return bad("no operation 0 to 2");
  change.op = static_cast<TableOp>(op);
  if (!in.Get(&change.step) || change.step < 0) return bad("no step, or a negative one");
  if (!in.Get(&n) || n > static_cast<uint64_t>(max_ids))
    return bad(fmt::format("no count of ids from 0 to {}", max_ids));
  const size_t per_id =
      sizeof(int64_t) +
      (change.op == TableOp::kApply ? static_cast<size_t>(dim) * sizeof(float) : 0);
  if (in.left() != n * per_id)
    return bad(fmt::format("{} bytes for {} ids, expected {}", in.left(), n, n * per_id));
  change.ids.resize(n);
  in.Bytes(change.ids.data(), n * sizeof(int64_t));
  if (change.op == TableOp::kApply) {
    change.grads.resize(n * static_cast<size_t>(dim));
    in.Bytes(change.grads.data(), change.grads.size() * sizeof(float));
  }
  return change;
}

}  // namespace pstrain
