// pstrain check --config F: everything about a job that can be found out
// before it is started on a cluster:
//   - the config parses;
//   - its model builds, by the code path training takes (TrainJob::Create),
//     so a layer that does not fit its input is found here;
//   - every data file it names (train and test, every shard) reads whole as
//     its format, and fits the model (roles/worker/data_fit.h): the first batch of
//     each file, then every sample;
//   - train.checkpoint.dir and PSTRAIN_LOG_DIR can be written (a directory
//     that does not exist yet counts when it can be created);
// then prints a summary: each layer's output shape, each parameter's shape
// and where it lives (roles/checkpoint/model_layout.h decides, as training does).
// Any failure is one line on stderr and exit 2.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "roles/checkpoint/model_layout.h"
#include "roles/worker/data_fit.h"
#include "roles/worker/trainer.h"
#include "src/app/commands.h"
#include "src/common/checkpoint_file.h"
#include "src/common/config/config.h"
#include "src/common/config/options.h"
#include "src/data/dataset.h"
#include "src/nn/layers.h"
#include "src/nn/model.h"

namespace pstrain {
namespace {

// Whether `dir` can be written, without making it: a directory that does
// not exist yet is probed in the nearest folder above it that does (where
// it would be made), by the probe checkpoints use (CheckWritableDirectory).
Status CheckWritable(const std::string& dir, const std::string& key) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path at = fs::absolute(dir, ec);
  if (ec) return InvalidArgument(fmt::format("{} {}: {}", key, dir, ec.message()));
  while (!fs::exists(at, ec) && at.has_parent_path() && at != at.parent_path())
    at = at.parent_path();
  if (!fs::is_directory(at, ec))
    return InvalidArgument(
        fmt::format("{} {}: cannot be made: {} is not a directory", key, dir, at.string()));
  return CheckWritableDirectory(at.string()).WithContext(fmt::format("{} {}", key, dir));
}

const char* PlaceName(WeightPlace place) {
  return place == WeightPlace::kServers ? "PS servers" : "all-reduced";
}

// Which columns each embedding_bag reads, when the columns name their
// tables: "ids: embedding_bag 'user' reads columns user_id, city (2 slots,
// vocab 4096)".
std::string TableReads(const Config& config) {
  std::string text;
  for (const LayerConfig& layer : NamedLayers(config.model)) {
    if (layer.type != LayerType::kEmbeddingBag || layer.slots.empty()) continue;
    std::vector<std::string> columns;
    for (const ColumnConfig& c : config.data.columns)
      if (std::find(c.tables.begin(), c.tables.end(), layer.name) != c.tables.end())
        columns.push_back(c.name);
    text += fmt::format("ids: embedding_bag '{}' reads column{} {} ({} slot{}, vocab {})\n",
                        layer.name, columns.size() == 1 ? "" : "s", fmt::join(columns, ", "),
                        layer.slots.size(), layer.slots.size() == 1 ? "" : "s", layer.vocab);
  }
  return text;
}

// One line per layer (its output) and per parameter (shape, size, place),
// the parameters in the model's order.
std::string Summary(const Config& config, const Model& model, const ModelLayout& layout) {
  struct Where {
    Shape shape;
    const char* place;
  };
  std::map<std::string, Where> where;
  for (const LayoutTensor& t : layout.tensors) where[t.name] = {t.shape, PlaceName(t.place)};
  // A server-held table's rows are its vocab (the worker's model holds one
  // batch's).
  for (const LayerConfig& c : NamedLayers(config.model))
    for (const LayoutTable& t : layout.tables)
      if (t.name == c.name + ".weight") where[t.name] = {{c.vocab, t.dim}, "table on servers"};
  int64_t total = 0;
  std::map<std::string, int64_t> by_place;
  const std::string ids = config.model.sparse_fields > 0
                              ? fmt::format(", {} ids a sample", config.model.sparse_fields)
                              : "";
  std::string text =
      fmt::format("model: input {}{}, loss {}, device {}\n",
                  config.model.input.empty() ? "none" : ShapeString(config.model.input), ids,
                  LossTypeName(config.model.loss), DeviceName(config.model.device));
  // Columns as wide as their longest name (a residual block's parameters
  // are long), 16 at least.
  size_t layer_width = 16, param_width = 16;
  for (const LayerOutput& l : model.layers()) layer_width = std::max(layer_width, l.name.size());
  for (const Param* p : model.params()) param_width = std::max(param_width, p->name.size());
  const auto row = [&](const std::string& layer, const std::string& type, const std::string& out,
                       const std::string& param, const std::string& shape, const std::string& size,
                       const std::string& lives) {
    std::string line = fmt::format("  {:<{}} {:<13} {:<13} {:<{}} {:<15} {:>9}  {}", layer,
                                   layer_width, type, out, param, param_width, shape, size, lives);
    return line.erase(line.find_last_not_of(' ') + 1) + "\n";
  };
  text += row("layer", "type", "output", "parameter", "shape", "size", "lives");
  for (const LayerOutput& l : model.layers()) {
    std::string layer = l.name;
    std::string type = LayerTypeName(l.type), out = ShapeString(l.shape);
    int shown = 0;
    for (const Param* p : model.params()) {
      auto it = where.find(p->name);
      if (p->name.rfind(l.name + ".", 0) != 0 || it == where.end()) continue;
      const int64_t size = NumElements(it->second.shape);
      const std::string place = p->trainable ? it->second.place : "workers, not trained";
      total += size;
      by_place[place] += size;
      text += row(layer, type, out, p->name, ShapeString(it->second.shape), std::to_string(size),
                  place);
      layer = type = out = "";
      ++shown;
    }
    if (shown == 0) text += row(layer, type, out, "", "", "", "");
  }
  text += fmt::format("parameters: {} floats", total);
  for (const auto& [place, size] : by_place) text += fmt::format("; {} {}", size, place);
  return text + "\n" + TableReads(config);
}

// Every sample `data` loaded from `paths` (data.`which`) against the model.
Status FitsJob(const TrainJob* job, const DataConfig& config, const Dataset& data,
               const std::vector<std::string>& paths, const char* which) {
  if (job == nullptr) return Status::OK();
  const DataFiles files = DataFilesOf(config.format, paths, which);
  return CheckFit(job->reads(), data, files.features, files.labels);
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "pstrain check: %s\n", message.c_str());
  return 2;
}

}  // namespace

int RunCheck(const CheckOptions& options) {
  auto config = LoadConfig(options.config_path, options.config_overrides);  // errors name the path
  if (!config.ok()) return Fail(config.status().message());
  // Errors of the data and the directories name the config first.
  auto fail = [&](const Status& st) {
    const std::string& m = st.message();
    return Fail(m.rfind(config->source, 0) == 0 ? m : fmt::format("{}: {}", config->source, m));
  };
  std::unique_ptr<TrainJob> job;
  if (config->has_model && config->has_data) {
    auto made = TrainJob::Create(*config);
    if (!made.ok()) return fail(made.status());
    job = std::move(*made);
    if (Status st = job->CheckData(); !st.ok()) return fail(st);
  }
  int64_t train = 0, test = 0;
  std::string skipped;  // lines data.on_bad_row: skip left out, by set
  auto note_skipped = [&](const Dataset& data, const char* which) {
    if (data.skipped_rows > 0) skipped += SkippedLines(data, which) + "\n";
  };
  if (config->has_data) {
    // Rank 0 of 1: every training file, shards included.
    auto data = LoadTrainShard(config->data, 0, 1);
    if (!data.ok()) return fail(data.status());
    train = data->size();
    note_skipped(*data, "train");
    if (Status st = FitsJob(job.get(), config->data, *data, config->data.train, "train"); !st.ok())
      return fail(st);
    if (!config->data.test.empty()) {
      auto held_out = LoadWhole(config->data, config->data.test, "test");
      if (!held_out.ok()) return fail(held_out.status());
      test = held_out->size();
      note_skipped(*held_out, "test");
      if (Status st = FitsJob(job.get(), config->data, *held_out, config->data.test, "test");
          !st.ok())
        return fail(st);
    }
  }
  if (config->train.checkpoint) {
    Status st = CheckWritable(config->train.checkpoint->dir, "train.checkpoint.dir");
    if (!st.ok()) return fail(st);
  }
  auto env = ParseLocalOptions({}, ProcessEnv());
  if (!env.ok()) return fail(env.status());
  if (Status st = CheckWritable(env->cluster.log_dir, "PSTRAIN_LOG_DIR"); !st.ok()) return fail(st);
  std::string summary;
  if (job) {
    auto layout = LayoutOf(*config);
    if (!layout.ok()) return fail(layout.status());
    summary = Summary(*config, job->model(), *layout);
  }
  std::printf("%s: OK: %lld training and %lld test samples%s\n%s", options.config_path.c_str(),
              static_cast<long long>(train), static_cast<long long>(test),
              !config->has_data    ? " (no data: section)"
              : !config->has_model ? " (no model: section)"
                                   : "",
              summary.c_str());
  std::fputs(skipped.c_str(), stdout);
  return 0;
}

}  // namespace pstrain
