#include "src/data/dataset.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cassert>
#include <filesystem>
#include <system_error>

#include "src/common/fnv.h"
#include "src/common/random.h"
#include "src/data/idx_reader.h"
#include "src/data/schema_reader.h"

namespace pstrain {
namespace {

constexpr size_t kNamedFiles = 8;  // files listed in one message before "..."

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kNamedFiles; ++i) {
    out += (i ? ", " : "") + names[i];
  }
  if (names.size() > kNamedFiles) out += fmt::format(", ... ({} files)", names.size());
  return out;
}

Status MissingFiles(const std::vector<std::string>& missing) {
  return NotFound("missing data files: " + JoinNames(missing));
}

// An idx pair, [images, labels], whose files are both there.
Status CheckIdxPair(const std::vector<std::string>& paths, const char* which) {
  if (paths.size() != 2) {
    return InvalidArgument(
        fmt::format("data.{}: idx needs [images, labels], got {} paths", which, paths.size()));
  }
  std::vector<std::string> missing;
  for (const std::string& p : paths) {
    if (!IsFile(p)) missing.push_back(p);
  }
  return missing.empty() ? Status::OK() : MissingFiles(missing);
}

// Which samples of a training file a load keeps (data.validation_fraction).
enum class Share { kAll, kTrain, kHeldOut };

// The samples of a file are held out by the file's name (not its
// directory, which may differ between hosts) and each sample's place.
uint64_t HoldOutKey(const DataConfig& config, const std::string& file) {
  const std::string name = std::filesystem::path(file).filename().string();
  return config.validation_seed ^ Mix64(Fnv(kFnvOffset, name.data(), name.size()));
}

bool HeldOut(const DataConfig& config, uint64_t file_key, int64_t index) {
  const uint64_t h = Mix64(file_key ^ Mix64(static_cast<uint64_t>(index)));
  return static_cast<double>(h >> 11) * 0x1.0p-53 < config.validation_fraction;
}

// Keeps the samples [from, size) of `data` that `share` asks for, samples
// of `file` from its first on.
void KeepShare(const DataConfig& config, const std::string& file, Share share, int64_t from,
               Dataset* data) {
  if (share == Share::kAll || config.validation_fraction <= 0) return;
  const int64_t width = data->dense_per_sample(), fields = data->fields;
  const bool weighted = !data->weights.empty();
  const uint64_t file_key = HoldOutKey(config, file);
  int64_t kept = from;
  for (int64_t s = from; s < data->size(); ++s) {
    if (HeldOut(config, file_key, s - from) != (share == Share::kHeldOut)) continue;
    if (kept != s) {
      data->labels[kept] = data->labels[s];
      std::copy_n(data->dense.begin() + s * width, width, data->dense.begin() + kept * width);
      std::copy_n(data->sparse.begin() + s * fields, fields, data->sparse.begin() + kept * fields);
      if (weighted)
        std::copy_n(data->weights.begin() + s * fields, fields,
                    data->weights.begin() + kept * fields);
    }
    ++kept;
  }
  data->labels.resize(kept);
  data->dense.resize(kept * width);
  data->sparse.resize(kept * fields);
  if (weighted) data->weights.resize(kept * fields);
}

// `max_samples` > 0: only the first that many are read (data.limit), so that
// a worker of a job on a slice holds the slice, not the whole file.
StatusOr<Dataset> LoadIdxPair(const std::vector<std::string>& paths, const char* which,
                              int64_t max_samples = 0) {
  PSTRAIN_RETURN_IF_ERROR(CheckIdxPair(paths, which));
  return LoadIdx(paths[0], paths[1], max_samples);
}

// The text files (criteo, csv, libsvm) one reader loads: this worker's
// shards (`shard`), or every file (evaluation).
struct TextPlan {
  std::vector<std::string> files;
  bool sharded_by_file = false;
};

StatusOr<TextPlan> PlanText(const std::vector<std::string>& paths, const char* which, bool shard,
                            int rank, int workers) {
  if (paths.empty()) return InvalidArgument(fmt::format("data.{}: no files listed", which));
  TextPlan plan;
  std::vector<std::string> missing, singles, all_shards;
  for (const std::string& p : paths) {
    auto shards = ListShards(p);
    if (!shards.ok()) return shards.status();
    if (shards->empty()) {
      if (IsFile(p)) {
        singles.push_back(p);
        plan.files.push_back(p);
      } else {
        missing.push_back(p);
      }
      continue;
    }
    for (const ShardFile& s : *shards) all_shards.push_back(s.path);
    for (const ShardFile& s : shard ? ShardsOf(*shards, rank, workers) : *shards) {
      plan.files.push_back(s.path);
    }
  }
  if (!missing.empty()) return MissingFiles(missing);
  if (!shard || all_shards.empty()) return plan;
  // A single file would be split by sample index and the shards by file; one
  // Batcher cannot do both.
  if (!singles.empty()) {
    return InvalidArgument(fmt::format("data.{}: mixes shard files ({}) with single files ({})",
                                       which, JoinNames(all_shards), JoinNames(singles)));
  }
  if (plan.files.empty()) {
    return InvalidArgument(
        fmt::format("data.{}: worker {} of {} has no shard: {} ({} files for {} workers)", which,
                    rank, workers, JoinNames(all_shards), all_shards.size(), workers));
  }
  plan.sharded_by_file = true;
  return plan;
}

bool IsText(DataFormat format) { return format != DataFormat::kIdx; }

StatusOr<Dataset> LoadText(const DataConfig& config, const std::vector<std::string>& paths,
                           const char* which, bool shard, int rank, int workers, int64_t limit,
                           Share share = Share::kAll) {
  if (config.vocab <= 0) {
    return InvalidArgument(fmt::format("data.vocab {}: expected > 0", config.vocab));
  }
  auto plan = PlanText(paths, which, shard, rank, workers);
  if (!plan.ok()) return plan.status();
  Dataset data;
  data.sharded_by_file = plan->sharded_by_file;
  // `limit` counts samples read, before any are held out.
  int64_t read = 0;
  for (const std::string& file : plan->files) {
    if (limit > 0 && read >= limit) break;
    const int64_t from = data.size();
    PSTRAIN_RETURN_IF_ERROR(AppendRows(file, config, limit > 0 ? from + limit - read : 0, &data));
    read += data.size() - from;
    KeepShare(config, file, share, from, &data);
  }
  if (data.sample_shape.empty()) {  // no files read: the shape all the same
    const RowParser parser = RowParser::For(config);
    data.sample_shape = {parser.dense()};
    data.fields = parser.fields();
  }
  return data;
}

// `share` of the training files: worker `rank`'s shards (`shard`) or all.
StatusOr<Dataset> LoadTrainFiles(const DataConfig& config, Share share, bool shard, int rank,
                                 int workers, int64_t limit) {
  if (IsText(config.format))
    return LoadText(config, config.train, "train", shard, rank, workers, limit, share);
  auto data = LoadIdxPair(config.train, "train", limit);
  if (data.ok()) KeepShare(config, config.train[0], share, 0, &*data);
  return data;
}

}  // namespace

StatusOr<std::vector<ShardFile>> ListShards(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string prefix = p.filename().string() + "-";
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::vector<ShardFile> shards;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    // No directory: no shards; the caller reports the missing path.
    if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) {
      return shards;
    }
    return Internal(fmt::format("{}: list directory: {}", dir.string(), ec.message()));
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 18 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    shards.push_back({path + name.substr(prefix.size() - 1), std::stoll(digits)});
  }
  if (ec) return Internal(fmt::format("{}: list directory: {}", dir.string(), ec.message()));
  std::sort(shards.begin(), shards.end(), [](const ShardFile& a, const ShardFile& b) {
    return a.index != b.index ? a.index < b.index : a.path < b.path;
  });
  return shards;
}

std::vector<ShardFile> ShardsOf(const std::vector<ShardFile>& all, int rank, int workers) {
  assert(workers > 0 && rank >= 0 && rank < workers);
  std::vector<ShardFile> mine;
  for (const ShardFile& s : all) {
    if (s.index % workers == rank) mine.push_back(s);
  }
  return mine;
}

StatusOr<Dataset> LoadTrainShard(const DataConfig& config, int rank, int workers) {
  assert(workers > 0 && rank >= 0 && rank < workers);
  return LoadTrainFiles(config, Share::kTrain, /*shard=*/true, rank, workers, config.limit);
}

Status CheckDataFiles(const DataConfig& config) {
  auto check = [&](const std::vector<std::string>& paths, const char* which) -> Status {
    if (IsText(config.format)) return PlanText(paths, which, /*shard=*/false, 0, 1).status();
    return CheckIdxPair(paths, which);
  };
  PSTRAIN_RETURN_IF_ERROR(check(config.train, "train"));
  if (!config.validation.empty()) PSTRAIN_RETURN_IF_ERROR(check(config.validation, "validation"));
  if (config.test.empty()) return Status::OK();
  return check(config.test, "test");
}

StatusOr<std::vector<FileSamples>> ReadFirstSamples(const DataConfig& config, int64_t n) {
  std::vector<FileSamples> out;
  const std::pair<const std::vector<std::string>*, const char*> lists[] = {
      {&config.train, "train"}, {&config.test, "test"}, {&config.validation, "validation"}};
  for (const auto& [paths, which] : lists) {
    if (paths->empty() && paths != &config.train) continue;  // no test or validation set
    if (!IsText(config.format)) {
      PSTRAIN_RETURN_IF_ERROR(CheckIdxPair(*paths, which));
      auto data = LoadIdx((*paths)[0], (*paths)[1], n);
      if (!data.ok()) return data.status();
      out.push_back({(*paths)[0], (*paths)[1], std::move(*data)});
      continue;
    }
    if (config.vocab <= 0)
      return InvalidArgument(fmt::format("data.vocab {}: expected > 0", config.vocab));
    auto plan = PlanText(*paths, which, /*shard=*/false, 0, 1);
    if (!plan.ok()) return plan.status();
    for (const std::string& file : plan->files) {
      FileSamples f{file, file, {}};
      PSTRAIN_RETURN_IF_ERROR(AppendRows(file, config, n, &f.samples));
      out.push_back(std::move(f));
    }
  }
  return out;
}

StatusOr<Dataset> LoadValidation(const DataConfig& config) {
  if (config.validation_fraction <= 0) return LoadWhole(config, config.validation, "validation");
  // The held-out samples of every training file, whichever worker trains
  // on the rest. Each file whole: data.limit bounds training, and a worker
  // reads its first samples of its own shards (held-out ones are never
  // trained, so more of them measured is no leak).
  return LoadTrainFiles(config, Share::kHeldOut, /*shard=*/false, 0, 1, /*limit=*/0);
}

StatusOr<Dataset> LoadWhole(const DataConfig& config, const std::vector<std::string>& paths,
                            const char* which) {
  if (IsText(config.format))
    return LoadText(config, paths, which, /*shard=*/false, 0, 1, /*limit=*/0);
  return LoadIdxPair(paths, which);
}

bool SplitsTrainByFile(const DataConfig& config) {
  if (!IsText(config.format)) return false;
  for (const std::string& p : config.train) {
    auto shards = ListShards(p);
    if (shards.ok() && !shards->empty()) return true;
  }
  return false;
}

}  // namespace pstrain
