#include "roles/checkpoint/shard_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <map>

#include "src/common/checkpoint_file.h"

namespace pstrain {
namespace {

std::string Prefix(const std::string& tensor, uint32_t part) {
  return fmt::format("p/{}/{}/", tensor, part);
}

std::string MetaText(const ShardMeta& m) {
  return fmt::format("server {}\nservers {}\nworkers {}\n", m.server, m.servers, m.workers);
}

// Since rows are placed by jump hash (comm/ps/row_placement.h); a meta
// without it is from a checkpoint whose rows were placed by modulo.
constexpr char kRowsByJumpHash[] = "rows jump\n";

std::vector<float> Floats(const Section& s) {
  std::vector<float> out(s.bytes.size() / sizeof(float));
  std::memcpy(out.data(), s.bytes.data(), out.size() * sizeof(float));
  return out;
}

// "p/<tensor>/<part>/<rest>", rest one of "state", "values", "slot/<name>".
// Parsed from the right: a tensor name may itself hold '/'.
bool SplitName(const std::string& name, std::string* tensor, uint32_t* part, std::string* rest) {
  if (name.rfind("p/", 0) != 0) return false;
  size_t cut = std::string::npos;
  for (const char* tail : {"/state", "/values"}) {
    size_t n = std::strlen(tail);
    if (name.size() > n && name.compare(name.size() - n, n, tail) == 0) cut = name.size() - n;
  }
  if (cut == std::string::npos) cut = name.rfind("/slot/");
  if (cut == std::string::npos || cut < 2) return false;
  *rest = name.substr(cut + 1);
  size_t slash = name.rfind('/', cut - 1);
  if (slash == std::string::npos || slash < 2) return false;
  std::string digits = name.substr(slash + 1, cut - slash - 1);
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *tensor = name.substr(2, slash - 2);
  *part = static_cast<uint32_t>(std::stoul(digits));
  return !tensor->empty();
}

}  // namespace

Status WriteShardFile(const std::string& path, const ShardMeta& meta,
                      const std::vector<PartitionSnapshot>& partitions,
                      const std::vector<TableSnapshot>& tables,
                      const std::vector<StoreFile>* store_files) {
  std::string meta_text = MetaText(meta) + kRowsByJumpHash;
  std::vector<SectionView> sections{{"meta", meta_text.data(), meta_text.size()}};
  std::vector<std::array<int64_t, 3>> states(partitions.size());
  std::vector<std::string> names;  // keeps the section names alive
  names.reserve(partitions.size() * 4);
  for (size_t i = 0; i < partitions.size(); ++i) {
    const PartitionSnapshot& p = partitions[i];
    std::string prefix = Prefix(p.tensor, p.part);
    states[i] = {p.applied, p.clock, static_cast<int64_t>(p.optimizer_steps)};
    names.push_back(prefix + "state");
    sections.push_back({names.back(), states[i].data(), sizeof(states[i])});
    names.push_back(prefix + "values");
    sections.push_back({names.back(), p.values.data(), p.values.size() * sizeof(float)});
    for (const auto& [slot, data] : p.slots) {
      names.push_back(prefix + "slot/" + slot);
      sections.push_back({names.back(), data.data(), data.size() * sizeof(float)});
    }
  }
  std::vector<std::string> table_bytes;  // clock, then the table's bytes
  table_bytes.reserve(tables.size());
  for (const TableSnapshot& t : tables) {
    std::string& b = table_bytes.emplace_back(sizeof(int64_t), '\0');
    std::memcpy(b.data(), &t.clock, sizeof(int64_t));
    b += t.bytes;
    names.push_back((t.tiered ? "tiered/" : "t/") + t.name);
    sections.push_back({names.back(), b.data(), b.size()});
  }
  const std::string store_text = store_files ? FormatStoreFiles(*store_files) : "";
  if (store_files) sections.push_back({"store", store_text.data(), store_text.size()});
  return WriteCheckpointFile(path, sections);
}

StatusOr<ShardContents> ReadShardFile(const std::string& path, const ShardMeta& expected) {
  auto sections = ReadCheckpointFile(path);
  if (!sections.ok()) return sections.status();
  if (sections->empty() || (*sections)[0].name != "meta")
    return InvalidArgument(fmt::format("{}: no meta section", path));
  std::string meta((*sections)[0].bytes.begin(), (*sections)[0].bytes.end());
  // The worker count may differ: a resumed job re-shards its data
  // (roles/checkpoint/worker_place.h); the servers' count and this one's rank may not,
  // as each partition lives on one server. Both shapes are printed in full.
  ShardMeta said;
  const bool by_jump_hash = meta.size() > std::strlen(kRowsByJumpHash) &&
                            meta.compare(meta.size() - std::strlen(kRowsByJumpHash),
                                         std::string::npos, kRowsByJumpHash) == 0;
  if (by_jump_hash) meta.resize(meta.size() - std::strlen(kRowsByJumpHash));
  if (std::sscanf(meta.c_str(), "server %d\nservers %d\nworkers %d\n", &said.server, &said.servers,
                  &said.workers) != 3 ||
      meta != MetaText(said) || said.server != expected.server ||
      said.servers != expected.servers) {
    std::string text = meta.substr(0, 200);
    std::replace(text.begin(), text.end(), '\n', ' ');
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return FailedPrecondition(fmt::format(
        "{} was written by a job of another shape: the checkpoint's is '{}', this job's is "
        "'server {} servers {} workers {}' (the server count must stay the same to resume)",
        path, text, expected.server, expected.servers, expected.workers));
  }
  ShardContents out;
  out.workers = said.workers;
  out.rows_by_modulo = !by_jump_hash;
  std::map<std::pair<std::string, uint32_t>, PartitionSnapshot> by_key;
  for (size_t i = 1; i < sections->size(); ++i) {
    const Section& s = (*sections)[i];
    if (s.name == "store") {
      auto files = ParseStoreFiles(std::string(s.bytes.begin(), s.bytes.end()));
      if (!files.ok()) return files.status().WithContext(path);
      out.has_store = true;
      out.store_files = std::move(*files);
      continue;
    }
    const bool tiered = s.name.rfind("tiered/", 0) == 0;
    if (tiered || s.name.rfind("t/", 0) == 0) {
      if (s.bytes.size() < sizeof(int64_t))
        return InvalidArgument(fmt::format("{}: section '{}' is too short", path, s.name));
      TableSnapshot& t = out.tables.emplace_back();
      t.name = s.name.substr(tiered ? 7 : 2);
      t.tiered = tiered;
      std::memcpy(&t.clock, s.bytes.data(), sizeof(int64_t));
      t.bytes.assign(s.bytes.begin() + sizeof(int64_t), s.bytes.end());
      continue;
    }
    std::string tensor, rest;
    uint32_t part = 0;
    if (!SplitName(s.name, &tensor, &part, &rest) || s.bytes.size() % sizeof(float) != 0)
      return InvalidArgument(fmt::format("{}: unexpected section '{}'", path, s.name));
    PartitionSnapshot& p = by_key[{tensor, part}];
    p.tensor = tensor;
    p.part = part;
    if (rest == "state") {
      if (s.bytes.size() != 3 * sizeof(int64_t))
        return InvalidArgument(fmt::format("{}: section '{}' has the wrong size", path, s.name));
      int64_t state[3];
      std::memcpy(state, s.bytes.data(), sizeof(state));
      p.applied = state[0];
      p.clock = state[1];
      p.optimizer_steps = static_cast<uint64_t>(state[2]);
    } else if (rest == "values") {
      p.values = Floats(s);
    } else {
      p.slots.emplace_back(rest.substr(5), Floats(s));
    }
  }
  for (auto& [key, p] : by_key) {
    if (p.values.empty())
      return InvalidArgument(
          fmt::format("{}: '{}' partition {} has no values", path, p.tensor, p.part));
    out.partitions.push_back(std::move(p));
  }
  return out;
}

}  // namespace pstrain
