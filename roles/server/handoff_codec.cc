#include "roles/server/handoff_codec.h"

#include <fmt/format.h>

#include <cstring>

namespace pstrain {
namespace {

constexpr char kMagic[4] = {'P', 'S', 'H', 'O'};
constexpr uint32_t kFormat = 1;
constexpr uint32_t kMaxSlots = 8;
constexpr uint32_t kMaxSlotName = 64;

// Writes into memory sized once up front.
class Writer {
 public:
  explicit Writer(size_t size) : out_(size) {}
  template <typename T>
  void Put(const T& v) {
    Bytes(&v, sizeof(T));
  }
  void Bytes(const void* data, size_t n) {
    std::memcpy(out_.data() + at_, data, n);
    at_ += n;
  }
  std::vector<uint8_t> Take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
  size_t at_ = 0;
};

// Reads from a span, failing (and staying failed) past its end.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), left_(size) {}
  template <typename T>
  bool Get(T* v) {
    return Bytes(v, sizeof(T));
  }
  bool Bytes(void* out, size_t n) {
    if (n > left_) return false;
    std::memcpy(out, data_, n);
    data_ += n;
    left_ -= n;
    return true;
  }
  size_t left() const { return left_; }

 private:
  const uint8_t* data_;
  size_t left_;
};

}  // namespace

std::vector<uint8_t> EncodePartitionState(const PartitionSnapshot& p) {
  const size_t floats = p.values.size() * sizeof(float);
  size_t size = 4 + 4 + 3 * 8 + 8 + 4 + floats;
  for (const auto& [name, slot] : p.slots) size += 4 + name.size() + floats;
  Writer out(size);
  out.Bytes(kMagic, 4);
  out.Put(kFormat);
  out.Put(p.applied);
  out.Put(p.clock);
  out.Put(p.optimizer_steps);
  out.Put(static_cast<uint64_t>(p.values.size()));
  out.Put(static_cast<uint32_t>(p.slots.size()));
  out.Bytes(p.values.data(), floats);
  for (const auto& [name, slot] : p.slots) {
    out.Put(static_cast<uint32_t>(name.size()));
    out.Bytes(name.data(), name.size());
    out.Bytes(slot.data(), floats);  // every slot has the values' size
  }
  return out.Take();
}

StatusOr<PartitionSnapshot> DecodePartitionState(const uint8_t* data, size_t size,
                                                 const std::string& tensor, uint32_t part,
                                                 int64_t max_elements) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument(
        fmt::format("the state of '{}' partition {} ({} bytes): {}", tensor, part, size, what));
  };
  Reader in(data, size);
  char magic[4];
  uint32_t format = 0, slots = 0;
  uint64_t elements = 0;
  PartitionSnapshot p;
  p.tensor = tensor;
  p.part = part;
  if (!in.Bytes(magic, 4) || std::memcmp(magic, kMagic, 4) != 0) return bad("no PSHO header");
  if (!in.Get(&format) || format != kFormat)
    return bad(fmt::format("format {}, this build reads {}", format, kFormat));
  if (!in.Get(&p.applied) || !in.Get(&p.clock) || !in.Get(&p.optimizer_steps) ||
      !in.Get(&elements) || !in.Get(&slots))
    return bad("cut short in its counts");
  if (p.applied < 0 || p.clock < 0) return bad("a negative clock");
  if (elements == 0 || elements > static_cast<uint64_t>(max_elements))
    return bad(fmt::format("{} values, expected 1 to {}", elements, max_elements));
  if (slots > kMaxSlots)
    return bad(fmt::format("{} optimizer slots, at most {}", slots, kMaxSlots));
  const size_t floats = elements * sizeof(float);
  // Whole before any memory is taken: every slot needs its values and more.
  if (in.left() < floats * (1 + slots)) return bad("cut short in its values");
  p.values.resize(elements);
  in.Bytes(p.values.data(), floats);
  for (uint32_t k = 0; k < slots; ++k) {
    uint32_t name_size = 0;
    if (!in.Get(&name_size) || name_size == 0 || name_size > kMaxSlotName)
      return bad(fmt::format("slot {} has no name of 1 to {} bytes", k, kMaxSlotName));
    std::string name(name_size, '\0');
    if (!in.Bytes(name.data(), name_size)) return bad(fmt::format("slot {} cut short", k));
    // Optimizer slot names are plain words ("m", "v"); nothing else is
    // written into a log line.
    for (char c : name)
      if (c < '!' || c > '~')
        return bad(fmt::format("slot {} has a name that is not plain text", k));
    std::vector<float> slot(elements);
    if (!in.Bytes(slot.data(), floats)) return bad(fmt::format("slot '{}' cut short", name));
    p.slots.emplace_back(std::move(name), std::move(slot));
  }
  if (in.left() != 0) return bad(fmt::format("{} bytes after its end", in.left()));
  return p;
}

}  // namespace pstrain
