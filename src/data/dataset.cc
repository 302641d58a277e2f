#include "src/data/dataset.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cassert>
#include <filesystem>
#include <system_error>

#include "src/data/criteo_reader.h"
#include "src/data/idx_reader.h"

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

// `max_samples` > 0: only the first that many are read (data.limit), so that
// a worker of a job on a slice holds the slice, not the whole file.
StatusOr<Dataset> LoadIdxPair(const std::vector<std::string>& paths, const char* which,
                              int64_t max_samples = 0) {
  PSTRAIN_RETURN_IF_ERROR(CheckIdxPair(paths, which));
  return LoadIdx(paths[0], paths[1], max_samples);
}

// The criteo files one reader loads: this worker's shards (`shard`), or every
// file (evaluation).
struct CriteoPlan {
  std::vector<std::string> files;
  bool sharded_by_file = false;
};

StatusOr<CriteoPlan> PlanCriteo(const std::vector<std::string>& paths, const char* which,
                                bool shard, int rank, int workers) {
  if (paths.empty()) return InvalidArgument(fmt::format("data.{}: no files listed", which));
  CriteoPlan plan;
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

StatusOr<Dataset> LoadCriteo(const DataConfig& config, const std::vector<std::string>& paths,
                             const char* which, bool shard, int rank, int workers, int64_t limit) {
  if (config.vocab <= 0) {
    return InvalidArgument(fmt::format("data.vocab {}: expected > 0", config.vocab));
  }
  auto plan = PlanCriteo(paths, which, shard, rank, workers);
  if (!plan.ok()) return plan.status();
  Dataset data;
  data.sample_shape = {kCriteoDense};
  data.fields = kCriteoCategorical;
  data.sharded_by_file = plan->sharded_by_file;
  for (const std::string& file : plan->files) {
    if (limit > 0 && data.size() >= limit) break;
    PSTRAIN_RETURN_IF_ERROR(AppendCriteo(file, config.vocab, limit, &data));
  }
  return data;
}

// Past a switch on the format: only a config built in code gets there.
Status UnknownFormat(const DataConfig& config) {
  return InvalidArgument(
      fmt::format("data.format {}: expected idx or criteo", static_cast<int>(config.format)));
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
  switch (config.format) {
    case DataFormat::kIdx: {
      return LoadIdxPair(config.train, "train", config.limit);
    }
    case DataFormat::kCriteo:
      return LoadCriteo(config, config.train, "train", /*shard=*/true, rank, workers, config.limit);
  }
  return UnknownFormat(config);
}

Status CheckDataFiles(const DataConfig& config) {
  auto check = [&](const std::vector<std::string>& paths, const char* which) -> Status {
    switch (config.format) {
      case DataFormat::kIdx:
        return CheckIdxPair(paths, which);
      case DataFormat::kCriteo:
        return PlanCriteo(paths, which, /*shard=*/false, 0, 1).status();
    }
    return UnknownFormat(config);
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
    switch (config.format) {
      case DataFormat::kIdx: {
        PSTRAIN_RETURN_IF_ERROR(CheckIdxPair(*paths, which));
        auto data = LoadIdx((*paths)[0], (*paths)[1], n);
        if (!data.ok()) return data.status();
        out.push_back({(*paths)[0], (*paths)[1], std::move(*data)});
        break;
      }
      case DataFormat::kCriteo: {
        if (config.vocab <= 0)
          return InvalidArgument(fmt::format("data.vocab {}: expected > 0", config.vocab));
        auto plan = PlanCriteo(*paths, which, /*shard=*/false, 0, 1);
        if (!plan.ok()) return plan.status();
        for (const std::string& file : plan->files) {
          FileSamples f{file, file, {}};
          PSTRAIN_RETURN_IF_ERROR(AppendCriteo(file, config.vocab, n, &f.samples));
          out.push_back(std::move(f));
        }
        break;
      }
      default:
        return UnknownFormat(config);
    }
  }
  return out;
}

StatusOr<Dataset> LoadWhole(const DataConfig& config, const std::vector<std::string>& paths,
                            const char* which) {
  switch (config.format) {
    case DataFormat::kIdx:
      return LoadIdxPair(paths, which);
    case DataFormat::kCriteo:
      return LoadCriteo(config, paths, which, /*shard=*/false, 0, 1, /*limit=*/0);
  }
  return UnknownFormat(config);
}

bool SplitsTrainByFile(const DataConfig& config) {
  if (config.format != DataFormat::kCriteo) return false;
  for (const std::string& p : config.train) {
    auto shards = ListShards(p);
    if (shards.ok() && !shards->empty()) return true;
  }
  return false;
}

}  // namespace pstrain
