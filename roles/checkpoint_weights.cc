#include "roles/checkpoint_weights.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>

#include "roles/allreduced_weights.h"

namespace pstrain {
namespace {

// Fixed-width little-endian fields, never past the end.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n) : p_(p), left_(n) {}
  template <typename T>
  bool Get(T* v) {
    if (left_ < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    Skip(sizeof(T));
    return true;
  }
  void Skip(size_t n) { p_ += n, left_ -= n; }
  const uint8_t* at() const { return p_; }
  size_t left() const { return left_; }

 private:
  const uint8_t* p_;
  size_t left_;
};

// "t/<name>": clock i64, then SparseTable::Serialize's bytes
// (embedding/sparse_table_io.cc): only the rows' ids and values are read.
Status ListRows(const std::string& path, const LayoutTable& t, const Section& s,
                std::vector<std::pair<int64_t, const uint8_t*>>* out) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument(fmt::format("{}: table '{}': {}", path, t.name, what));
  };
  constexpr size_t kClock = 8, kMagic = 8, kCrc = 4;
  if (s.bytes.size() < kClock + kMagic + kCrc) return bad("too short");
  const uint8_t* table = s.bytes.data() + kClock;
  const size_t size = s.bytes.size() - kClock;
  if (std::memcmp(table, "PSEMBTBL", kMagic) != 0) return bad("not a serialized table");
  uint32_t stored;
  std::memcpy(&stored, table + size - kCrc, kCrc);
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t done = 0; done < size - kCrc;) {
    const auto chunk = static_cast<uInt>(std::min<size_t>(size - kCrc - done, 1u << 30));
    crc = crc32(crc, table + done, chunk);
    done += chunk;
  }
  if (crc != stored) return bad("checksum mismatch");
  Cursor in(table + kMagic, size - kMagic - kCrc);
  uint32_t version, name_size, dim, slots, type;
  int64_t clock, updates;
  uint64_t rows;
  if (!in.Get(&version) || version < 1 || version > 2) return bad("unsupported version");
  if (!in.Get(&name_size) || name_size > in.left()) return bad("truncated name");
  if (std::string(reinterpret_cast<const char*>(in.at()), name_size) != t.name)
    return bad("it holds another table");
  in.Skip(name_size);
  if (!in.Get(&dim) || !in.Get(&slots) || !in.Get(&type) || !in.Get(&clock) || !in.Get(&updates) ||
      !in.Get(&rows))
    return bad("truncated header");
  if (dim != t.dim || slots > 16)
    return bad(fmt::format("dim {} with {} slots; the layout says dim {}", dim, slots, t.dim));
  const size_t row_bytes = 3 * sizeof(int64_t) + (1 + size_t{slots}) * dim * sizeof(float);
  if (rows > in.left() / row_bytes)
    return bad(fmt::format("{} rows of {} bytes do not fit {} bytes", rows, row_bytes, in.left()));
  out->reserve(out->size() + rows);
  for (uint64_t r = 0; r < rows; ++r) {
    int64_t id;
    in.Get(&id);
    out->emplace_back(id, in.at() + 2 * sizeof(int64_t));  // after last_touched, updates
    in.Skip(row_bytes - sizeof(int64_t));
  }
  return Status::OK();
}

}  // namespace

int64_t TableRows::Find(int64_t id) const {
  auto it = std::lower_bound(ids.begin(), ids.end(), id);
  return it != ids.end() && *it == id ? it - ids.begin() : -1;
}

StatusOr<std::unique_ptr<CheckpointWeights>> CheckpointWeights::Open(const std::string& dir) {
  std::unique_ptr<CheckpointWeights> w(new CheckpointWeights());
  std::vector<std::string> skipped;
  auto ref = FindNewestCheckpoint(dir, &skipped);
  if (!ref.ok()) {
    if (!skipped.empty()) return ref.status().WithContext(skipped.front());
    return ref.status();
  }
  // A newer step that is damaged (not merely still being written, without
  // its MANIFEST) is an error: exporting an older step instead would go
  // unnoticed.
  for (const std::string& why : skipped)
    if (why.find("missing, the checkpoint is incomplete") == std::string::npos)
      return InvalidArgument(why);
  w->ref_ = *ref;
  const auto& files = w->ref_.files;
  if (std::find(files.begin(), files.end(), kModelLayoutFileName) == files.end())
    return FailedPrecondition(fmt::format(
        "{} has no {} (written by an older pstrain, which did not record the weights' shapes): "
        "train again or resume it once to write a new checkpoint",
        w->ref_.step_dir, kModelLayoutFileName));
  auto layout = ReadModelLayout(w->ref_.step_dir + "/" + kModelLayoutFileName);
  if (!layout.ok()) return layout.status();
  w->layout_ = std::move(*layout);
  // The files were verified against the MANIFEST by FindNewestCheckpoint; a
  // file changed since then fails its own checksum here.
  for (const std::string& name : files) {
    const bool shard = name.rfind("server-", 0) == 0;
    if (!shard && name != AllReducedWeights::kFileName) continue;
    File f{w->ref_.step_dir + "/" + name, {}};
    auto sections = ReadCheckpointFile(f.path);
    if (!sections.ok()) return sections.status();
    f.sections = std::move(*sections);
    (shard ? w->shards_.emplace_back() : w->allreduced_) = std::move(f);
  }
  return w;
}

StatusOr<std::vector<float>> CheckpointWeights::Dense(const LayoutTensor& t) const {
  const auto elements = static_cast<size_t>(NumElements(t.shape));
  std::vector<float> out;
  if (t.place == WeightPlace::kAllReduced) {
    const std::string want = t.name + "/value";
    for (const Section& s : allreduced_.sections) {
      if (s.name != want) continue;
      if (s.bytes.size() != elements * sizeof(float))
        return InvalidArgument(fmt::format("{}: '{}' has {} bytes, its shape needs {}",
                                           allreduced_.path, want, s.bytes.size(),
                                           elements * sizeof(float)));
      out.resize(elements);
      std::memcpy(out.data(), s.bytes.data(), s.bytes.size());
      return out;
    }
    return InvalidArgument(fmt::format("{}: no weight '{}' in {}", ref_.step_dir, t.name,
                                       AllReducedWeights::kFileName));
  }
  // "p/<tensor>/<part>/values" on whichever server holds each part.
  std::map<uint32_t, std::pair<const File*, const Section*>> parts;
  const std::string prefix = "p/" + t.name + "/";
  for (const File& f : shards_) {
    for (const Section& s : f.sections) {
      if (s.name.size() <= prefix.size() + 7 || s.name.compare(0, prefix.size(), prefix) != 0 ||
          s.name.compare(s.name.size() - 7, 7, "/values") != 0)
        continue;
      const std::string digits = s.name.substr(prefix.size(), s.name.size() - prefix.size() - 7);
      if (digits.empty() || digits.size() > 9 ||
          digits.find_first_not_of("0123456789") != std::string::npos)
        continue;
      const auto part = static_cast<uint32_t>(std::stoul(digits));
      if (!parts.emplace(part, std::make_pair(&f, &s)).second)
        return InvalidArgument(
            fmt::format("{}: '{}' partition {} is held twice", f.path, t.name, part));
    }
  }
  size_t bytes = 0;
  uint32_t expect = 0;
  for (const auto& [part, where] : parts) {
    if (part != expect++)
      return InvalidArgument(
          fmt::format("{}: '{}' partition {} is missing", ref_.step_dir, t.name, expect - 1));
    bytes += where.second->bytes.size();
  }
  if (parts.empty() || bytes != elements * sizeof(float))
    return InvalidArgument(fmt::format("{}: '{}' has {} bytes in {} partitions, its shape needs {}",
                                       ref_.step_dir, t.name, bytes, parts.size(),
                                       elements * sizeof(float)));
  out.resize(elements);
  auto* into = reinterpret_cast<uint8_t*>(out.data());
  for (const auto& [part, where] : parts) {
    std::memcpy(into, where.second->bytes.data(), where.second->bytes.size());
    into += where.second->bytes.size();
  }
  return out;
}

StatusOr<TableRows> CheckpointWeights::Table(const LayoutTable& t) const {
  std::vector<std::pair<int64_t, const uint8_t*>> rows;
  const std::string want = "t/" + t.name;
  for (const File& f : shards_)
    for (const Section& s : f.sections)
      if (s.name == want) PSTRAIN_RETURN_IF_ERROR(ListRows(f.path, t, s, &rows));
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  TableRows out;
  out.dim = t.dim;
  out.ids.reserve(rows.size());
  out.rows.reserve(rows.size());
  for (const auto& [id, row] : rows) {
    if (!out.ids.empty() && out.ids.back() == id)
      return InvalidArgument(
          fmt::format("{}: table '{}' holds row {} twice", ref_.step_dir, t.name, id));
    out.ids.push_back(id);
    out.rows.push_back(row);
  }
  return out;
}

}  // namespace pstrain
