#include "roles/checkpoint/weights.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "roles/checkpoint/shard_file.h"
#include "roles/checkpoint/step_files.h"
#include "roles/checkpoint/store.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

// Reading a store takes few blocks more than once: a small cache; and a
// compaction would rewrite the whole copy (disk and memory) for nothing.
RowStoreOptions ReadingOptions() {
  RowStoreOptions o;
  o.block_cache_bytes = size_t{4} << 20;
  o.write_buffer_bytes = size_t{4} << 20;
  o.compact = false;
  return o;
}

}  // namespace

CheckpointWeights::~CheckpointWeights() {
  stores_.clear();  // closed before their directory goes
  std::error_code ec;
  if (!scratch_.empty()) fs::remove_all(scratch_, ec);
}

Status CheckpointWeights::RestoreStore(const std::string& name, File* shard) {
  const Section* listing = nullptr;
  for (const Section& s : shard->sections)
    if (s.name == "store") listing = &s;
  if (listing == nullptr) return Status::OK();
  int rank = -1;
  if (std::sscanf(name.c_str(), "server-%d.ckpt", &rank) != 1 || rank < 0 ||
      ShardFileName(rank) != name)
    return InvalidArgument(fmt::format("{}: a store listed by a file of no server", shard->path));
  auto files = ParseStoreFiles(std::string(listing->bytes.begin(), listing->bytes.end()));
  if (!files.ok()) return files.status().WithContext(shard->path);
  const std::string dir = ref_.step_dir + "/" + StoreCheckpointDirName(rank);
  PSTRAIN_RETURN_IF_ERROR(CheckStoreFiles(dir, *files));
  if (scratch_.empty()) {
    std::error_code ec;
    std::string templ = (fs::temp_directory_path(ec) / "pstrain-checkpoint-XXXXXX").string();
    if (ec || ::mkdtemp(templ.data()) == nullptr)
      return FailedPrecondition(fmt::format(
          "cannot make a scratch directory to read {} (set TMPDIR to a writable directory): {}",
          dir, ec ? ec.message() : std::strerror(errno)));
    scratch_ = templ;
  }
  auto store =
      RowStore::Restore(dir, scratch_ + "/" + StoreCheckpointDirName(rank), ReadingOptions());
  if (!store.ok()) return store.status();
  shard->store = store->get();
  stores_.push_back(std::move(*store));
  return Status::OK();
}

StatusOr<std::unique_ptr<CheckpointWeights>> CheckpointWeights::Open(const std::string& dir) {
  std::unique_ptr<CheckpointWeights> w(new CheckpointWeights());
  // A step's own directory (".../step-000000000016", say the one BEST
  // names): that step, whatever is newer.
  std::filesystem::path path = std::filesystem::path(dir).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();  // "ckpt/step-.../"
  const std::string base = path.filename().string();
  std::string parent = path.parent_path().string();
  if (parent.empty()) parent = ".";
  int64_t step = -1;
  const char* digits = base.data() + std::min<size_t>(base.size(), 5);
  const auto [end, ec] = std::from_chars(digits, base.data() + base.size(), step);
  // Only a name the checkpoints' own (step-%012d): "step-16" is no step's.
  if (base.rfind("step-", 0) == 0 && ec == std::errc() && end == base.data() + base.size() &&
      step >= 0 && CheckpointStepDir(parent, step) == parent + "/" + base) {
    PSTRAIN_RETURN_IF_ERROR(VerifyStep(parent, step, &w->ref_));
  } else {
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
  }
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
    if (!shard && name != kAllReducedWeightsFileName) continue;
    File f{w->ref_.step_dir + "/" + name, {}};
    auto sections = ReadCheckpointFile(f.path);
    if (!sections.ok()) return sections.status();
    f.sections = std::move(*sections);
    if (shard) PSTRAIN_RETURN_IF_ERROR(w->RestoreStore(name, &f));
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
    return InvalidArgument(
        fmt::format("{}: no weight '{}' in {}", ref_.step_dir, t.name, kAllReducedWeightsFileName));
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

StatusOr<CheckpointTable> CheckpointWeights::Table(const LayoutTable& t) const {
  CheckpointTable table(t.name, t.dim);
  for (const File& f : shards_) {
    for (const Section& s : f.sections) {
      const bool tiered = s.name == "tiered/" + t.name;
      if (!tiered && s.name != "t/" + t.name) continue;
      if (s.bytes.size() < sizeof(int64_t))  // the clock comes first
        return InvalidArgument(fmt::format("{}: section '{}' is too short", f.path, s.name));
      PSTRAIN_RETURN_IF_ERROR(table.AddShare(f.path, tiered, s.bytes.data() + sizeof(int64_t),
                                             s.bytes.size() - sizeof(int64_t), f.store));
    }
  }
  return table;
}

}  // namespace pstrain
