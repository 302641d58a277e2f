#include "roles/server/handoff_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "src/common/byte_reader.h"

namespace pstrain {
namespace {

constexpr char kMagic[4] = {'P', 'S', 'H', 'O'};
constexpr uint32_t kFormat = 1;
constexpr uint32_t kMaxSlots = 8;
constexpr uint32_t kMaxSlotName = 64;
constexpr uint32_t kMaxWorkerSlots = 65536;
constexpr uint32_t kMaxChanges = 64;

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
  void Members(const std::vector<bool>& members) {
    for (bool m : members) Put(static_cast<uint8_t>(m ? 1 : 0));
  }
  std::vector<uint8_t> Take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
  size_t at_ = 0;
};

// n member flags of 0 or 1, never past the end.
bool GetMembers(ByteReader& in, size_t n, std::vector<bool>* out) {
  if (n > in.left()) return false;
  out->assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (in.at()[i] > 1) return false;
    (*out)[i] = in.at()[i] == 1;
  }
  in.Skip(n);
  return true;
}

}  // namespace

std::vector<uint8_t> EncodePartitionState(const MovedPartition& moved) {
  const PartitionSnapshot& p = moved.partition;
  const UpdateCore::State& core = moved.core;
  const size_t floats = p.values.size() * sizeof(float);
  size_t size = 4 + 4 + 3 * 8 + 8 + 4 + floats;
  for (const auto& [name, slot] : p.slots) size += 4 + name.size() + floats;
  const std::vector<uint8_t> core_bytes = EncodeCoreState(core);
  size += core_bytes.size();
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
  out.Bytes(core_bytes.data(), core_bytes.size());
  return out.Take();
}

std::vector<uint8_t> EncodeCoreState(const UpdateCore::State& core) {
  const size_t n = core.pushes.size();
  Writer out(4 + 3 * 8 + n * 9 + 4 + core.changes.size() * (8 + n));
  out.Put(static_cast<uint32_t>(n));
  out.Put(core.applied);
  out.Put(core.async_base_step);
  out.Put(core.async_base_applied);
  out.Bytes(core.pushes.data(), n * sizeof(int64_t));
  out.Members(core.members);
  out.Put(static_cast<uint32_t>(core.changes.size()));
  for (const auto& [step, members] : core.changes) {
    out.Put(step);
    out.Members(members);
  }
  return out.Take();
}

StatusOr<UpdateCore::State> DecodeCoreState(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  auto bad = [](const std::string& what) { return InvalidArgument(what); };
  UpdateCore::State core;
  uint32_t n = 0, changes = 0;
  if (!in.Get(&n) || !in.Get(&core.applied) || !in.Get(&core.async_base_step) ||
      !in.Get(&core.async_base_applied))
    return bad("cut short in its update state");
  if (n == 0 || n > kMaxWorkerSlots)
    return bad(fmt::format("{} worker slots, expected 1 to {}", n, kMaxWorkerSlots));
  if (core.applied < 0 || core.async_base_step < 0 || core.async_base_applied < 0)
    return bad("a negative count in its update state");
  if (in.left() < size_t{n} * 9) return bad("cut short in its workers' pushes");
  core.pushes.resize(n);
  in.Bytes(core.pushes.data(), n * sizeof(int64_t));
  for (int64_t pushes : core.pushes)
    if (pushes < 0) return bad("a negative count of pushes");
  if (!GetMembers(in, n, &core.members)) return bad("members that are not 0 or 1");
  if (std::find(core.members.begin(), core.members.end(), true) == core.members.end())
    return bad("no member");
  if (!in.Get(&changes) || changes > kMaxChanges)
    return bad(fmt::format("no count of announced changes from 0 to {}", kMaxChanges));
  for (uint32_t c = 0; c < changes; ++c) {
    int64_t step = 0;
    std::vector<bool> members;
    if (!in.Get(&step) || step < 0 || !GetMembers(in, n, &members))
      return bad(fmt::format("announced change {} is cut short or holds a bad step or member", c));
    core.changes.emplace_back(step, std::move(members));
  }
  if (in.left() != 0) return bad(fmt::format("{} bytes after its end", in.left()));
  return core;
}

StatusOr<MovedPartition> DecodePartitionState(const uint8_t* data, size_t size,
                                              const std::string& tensor, uint32_t part,
                                              int64_t max_elements) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument(
        fmt::format("the state of '{}' partition {} ({} bytes): {}", tensor, part, size, what));
  };
  ByteReader in(data, size);
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
  auto core = DecodeCoreState(in.at(), in.left());
  if (!core.ok()) return bad(core.status().message());
  return MovedPartition{std::move(p), std::move(*core)};
}

}  // namespace pstrain
