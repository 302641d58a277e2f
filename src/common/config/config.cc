#include "src/common/config/config.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "src/common/config/overrides.h"
#include "src/common/config/reader.h"
#include "src/common/config/sizes.h"
#include "src/common/config/text.h"

namespace pstrain {
namespace config_internal {

namespace {

std::vector<Field> OptimizerFields(OptimizerConfig* out) {
  using T = OptimizerType;
  return {Required(Enum<T>("type", &out->type,
                           {{"sgd", T::kSgd},
                            {"momentum", T::kMomentum},
                            {"adam", T::kAdam},
                            {"adagrad", T::kAdagrad},
                            {"ftrl", T::kFtrl},
                            {"adamw", T::kAdamW},
                            {"rmsprop", T::kRmsprop}})),
          Float("lr", &out->lr, Bound::kPositive),
          Float("weight_decay", &out->weight_decay, Bound::kNonNegative),
          Int("warmup_steps", &out->warmup_steps, 0),
          Int("lr_decay_steps", &out->lr_decay_steps, 0),
          Float("lr_decay", &out->lr_decay, Bound::kPositive),
          Int("cosine_steps", &out->cosine_steps, 0),
          Float("min_lr", &out->min_lr, Bound::kNonNegative),
          Float("momentum", &out->momentum, Bound::kUnitInterval),
          Bool("nesterov", &out->nesterov),
          Float("beta1", &out->beta1, Bound::kUnitInterval),
          Float("beta2", &out->beta2, Bound::kUnitInterval),
          Float("epsilon", &out->epsilon, Bound::kPositive),
          Float("alpha", &out->alpha, Bound::kUnitInterval),
          Float("initial_accumulator", &out->initial_accumulator, Bound::kNonNegative),
          Float("lr_power", &out->lr_power, Bound::kNonPositive),
          Float("l1", &out->l1, Bound::kNonNegative),
          Float("l2", &out->l2, Bound::kNonNegative)};
}

Status ReadOptimizer(const Value& v, OptimizerConfig* out) {
  *out = OptimizerConfig{};
  PSTRAIN_RETURN_IF_ERROR(ReadMap(v, OptimizerFields(out)));
  // PyTorch's AdamW decays by default; its L2-free update is the point.
  if (out->type == OptimizerType::kAdamW && v.node.IsMap() && !v.node["weight_decay"])
    out->weight_decay = 0.01f;
  return Status::OK();
}

Status ReadOptionalOptimizer(const Value& v, std::optional<OptimizerConfig>* out) {
  return ReadOptimizer(v, &out->emplace());
}

// target_density: [min, max], 0 < min <= max <= 1.
Field DensityRange(const char* key, double* min, double* max) {
  return {key, [=](const Value& v) {
            const char* expected = "[min, max] with 0 < min <= max <= 1";
            if (!v.node.IsSequence() || v.node.size() != 2) return v.Expected(expected);
            double d[2];
            for (size_t i = 0; i < 2; ++i) {
              const YAML::Node item = v.node[i];
              if (!item.IsScalar() || !ParseNumber(item.Scalar(), &d[i]) || !(d[i] > 0) || d[i] > 1)
                return v.Expected(expected);
            }
            if (d[0] > d[1]) return v.Expected(expected);
            *min = d[0];
            *max = d[1];
            return Status::OK();
          }};
}

// A share of the elements, in (0, 1].
Field Density(const char* key, double* out) {
  return {key, [=](const Value& v) {
            double d = 0;
            if (!v.node.IsScalar() || !ParseNumber(v.node.Scalar(), &d) || !(d > 0) || d > 1)
              return v.Expected("a number in (0, 1]");
            *out = d;
            return Status::OK();
          }};
}

// step: in (0, 1), one message for every way to miss it (Float's [0, 1)
// would call 0 valid in the message and then refuse it).
Field Step(float* out) {
  Field unit = Float("step", out, Bound::kUnitInterval);
  return {"step", [=](const Value& v) {
            if (!unit.read(v).ok() || *out == 0) return v.Expected("a number in (0, 1)");
            return Status::OK();
          }};
}

std::vector<Field> CompressionFields(CompressionConfig* out) {
  using T = CompressionType;
  return {Required(Enum<T>("type", &out->type, {{"none", T::kNone}, {"threshold", T::kThreshold}})),
          Float("threshold", &out->threshold, Bound::kPositive),
          Bool("adaptive", &out->adaptive),
          DensityRange("target_density", &out->min_density, &out->max_density),
          Step(&out->step),
          Int("shake_up_every", &out->shake_up_every, 0),
          Int("warmup_epochs", &out->warmup_epochs, 0, 1000),
          Density("warmup_density", &out->warmup_density),
          Density("pull_density", &out->pull_density)};
}

Status ReadCompression(const Value& v, CompressionConfig* out) {
  *out = CompressionConfig{};
  std::map<std::string, int> lines;
  PSTRAIN_RETURN_IF_ERROR(ReadMap(v, CompressionFields(out), &lines));
  // Settings of a threshold encoding under type: none are a mistake.
  if (out->type == CompressionType::kNone)
    for (const auto& [key, line] : lines)
      if (key != "type") return v.Key(key, line).Error("is only used with type: threshold");
  return Status::OK();
}

Status ReadOptionalCompression(const Value& v, std::optional<CompressionConfig>* out) {
  return ReadCompression(v, &out->emplace());
}

std::vector<Field> CheckpointFields(CheckpointConfig* c) {
  return {Required(NonEmptyString("dir", &c->dir)), Int("every_steps", &c->every_steps, 0),
          Bool("resume", &c->resume), Int("keep", &c->keep, 1), Bool("keep_best", &c->keep_best)};
}

std::vector<Field> EarlyStoppingFields(EarlyStoppingConfig* e) {
  return {Choice("metric", &e->metric, {"accuracy", "auc", "logloss", "rmse"}),
          Int("patience", &e->patience, 1, 1000000),
          {"min_delta", [e](const Value& v) {
             float delta = 0;
             PSTRAIN_RETURN_IF_ERROR(Float("min_delta", &delta, Bound::kNonNegative).read(v));
             e->min_delta = delta;
             return Status::OK();
           }}};
}

Status ReadEarlyStopping(const Value& v, std::optional<EarlyStoppingConfig>* out) {
  out->emplace().line = v.line;
  return ReadMap(v, EarlyStoppingFields(&**out));
}

Status ReadCheckpoint(const Value& v, std::optional<CheckpointConfig>* out) {
  return ReadMap(v, CheckpointFields(&out->emplace()));
}

std::vector<Field> RecoveryFields(RecoveryConfig* r) {
  return {Int("wait_s", &r->wait_s, 0, 7 * 24 * 3600),
          Int("max_failed_link_rollbacks", &r->max_failed_link_rollbacks, 0, 1000)};
}

Status ReadRecovery(const Value& v, std::optional<RecoveryConfig>* out) {
  return ReadMap(v, RecoveryFields(&out->emplace()));
}

// [min, max] of a node count, lo <= min <= max <= 65536.
Field CountRange(const char* key, int lo, int* min, int* max) {
  return {
      key, [=](const Value& v) {
        const std::string expected = fmt::format("[min, max] with {} <= min <= max <= 65536", lo);
        if (!v.node.IsSequence() || v.node.size() != 2) return v.Expected(expected);
        int64_t n[2];
        for (size_t i = 0; i < 2; ++i) {
          const YAML::Node item = v.node[i];
          if (!item.IsScalar() || !ParseNumber(item.Scalar(), &n[i]) || n[i] < lo || n[i] > 65536)
            return v.Expected(expected);
        }
        if (n[0] > n[1]) return v.Expected(expected);
        *min = static_cast<int>(n[0]);
        *max = static_cast<int>(n[1]);
        return Status::OK();
      }};
}

std::vector<Field> ElasticFields(ElasticConfig* e) {
  return {Required(CountRange("workers", 1, &e->min_workers, &e->max_workers)),
          CountRange("servers", 0, &e->min_servers, &e->max_servers)};
}

Status ReadElastic(const Value& v, std::optional<ElasticConfig>* out) {
  return ReadMap(v, ElasticFields(&out->emplace()));
}

std::vector<Field> ReplicationFields(ReplicationConfig* r) {
  return {Int("replicas", &r->replicas, 0, ReplicationConfig::kMaxReplicas)};
}

Status ReadReplication(const Value& v, ReplicationConfig* out) {
  return ReadMap(v, ReplicationFields(out));
}

std::vector<Field> TrainFields(TrainConfig* t) {
  using M = UpdateMode;
  return {
      Int("epochs", &t->epochs, 1),
      Int("batch_size", &t->batch_size, 1, 1 << 20),
      Int("steps", &t->steps, 0),
      Enum<M>(
          "mode", &t->mode,
          {{"sync", M::kSync}, {"async", M::kAsync}, {"ssp", M::kSsp}, {"average", M::kAverage}}),
      Int("staleness", &t->staleness, 0),
      Int("average_every", &t->average_every, 1),
      Section("optimizer", &t->optimizer, &ReadOptimizer,
              &KeysOf<OptimizerConfig, &OptimizerFields>),
      Section("compression", &t->compression, &ReadCompression,
              &KeysOf<CompressionConfig, &CompressionFields>),
      Float("clip_norm", &t->clip_norm, Bound::kPositive),
      Uint64("seed", &t->seed),
      Int("log_every", &t->log_every, 1),
      Int("partition_bytes", &t->partition_bytes, 4096, int64_t{1} << 30, 4),
      Section("checkpoint", &t->checkpoint, &ReadCheckpoint,
              &KeysOf<CheckpointConfig, &CheckpointFields>),
      Section("early_stopping", &t->early_stopping, &ReadEarlyStopping,
              &KeysOf<EarlyStoppingConfig, &EarlyStoppingFields>),
      Section("recovery", &t->recovery, &ReadRecovery, &KeysOf<RecoveryConfig, &RecoveryFields>),
      Section("elastic", &t->elastic, &ReadElastic, &KeysOf<ElasticConfig, &ElasticFields>),
      Section("replication", &t->replication, &ReadReplication,
              &KeysOf<ReplicationConfig, &ReplicationFields>),
      NonEmptyString("store_dir", &t->store_dir)};
}

// Clipping by the global norm needs each step's whole mean gradient, exact,
// at one moment: what the modes that apply a worker's gradient alone, the
// encoders and the paths not built for it yet cannot give.
Status CheckClipping(const Value& v, const TrainConfig& t, std::map<std::string, int>& lines) {
  if (!lines.count("clip_norm")) return Status::OK();
  const Value clip = v.Key("clip_norm", lines["clip_norm"]);
  if (t.mode != UpdateMode::kSync)
    return clip.Error(
        "needs train.mode: sync: the global norm is of one step's gradient from every worker, "
        "which the other modes never hold at once");
  if (t.compression.enabled())
    return clip.Error(
        "does not work with train.compression: the encoders delay part of each gradient, so no "
        "step holds its whole gradient");
  if (t.elastic) return clip.Error("does not work with train.elastic yet");
  if (t.replication.replicas > 0) return clip.Error("does not work with train.replication yet");
  return Status::OK();
}

Status ReadTrain(const Value& v, TrainConfig* t) {
  using M = UpdateMode;
  std::map<std::string, int> lines;
  PSTRAIN_RETURN_IF_ERROR(ReadMap(v, TrainFields(t), &lines));
  // Recovery rolls back to a checkpoint: without them there is nothing to
  // roll back to, and the user would believe the job protected.
  if (t->recovery && t->recovery->wait_s > 0 && !t->checkpoint) {
    return v.Key("recovery", lines["recovery"])
        .Error("needs train.checkpoint: a job recovers by going back to its newest checkpoint");
  }
  // A change of shape passes through a checkpoint of the step it takes
  // effect at (roles/scheduler/elastic.cc); mode average checkpoints only
  // where a round of averaging ends, which would redo the steps since.
  if (t->elastic && !t->checkpoint)
    return v.Key("elastic", lines["elastic"])
        .Error(
            "needs train.checkpoint: a change of shape passes through a checkpoint of the step "
            "it takes effect at");
  if (t->elastic && t->mode == M::kAverage)
    return v.Key("elastic", lines["elastic"]).Error("does not work with mode: average");
  if (t->elastic && t->recovery && t->recovery->wait_s == 0)
    return v.Key("elastic", lines["elastic"])
        .Error(
            "needs train.recovery.wait_s above 0: every node registers again after a change "
            "of shape, within that wait");
  // Backups follow the primary placement, which a change of shape moves.
  if (t->elastic && t->replication.replicas > 0)
    return v.Key("replication", lines["replication"])
        .Error("does not work with train.elastic yet: backups follow a fixed placement");
  // A bound the chosen mode ignores is a mistake the user would not notice.
  if (t->staleness != 0 && t->mode != M::kSsp) {
    return v.Key("staleness", lines["staleness"])
        .Error(fmt::format("{} is only used with mode: ssp", t->staleness));
  }
  if (lines.count("average_every") && t->mode != M::kAverage) {
    return v.Key("average_every", lines["average_every"])
        .Error(fmt::format("{} is only used with mode: average", t->average_every));
  }
  if (t->mode == M::kAverage && !lines.count("average_every"))
    return v.Key("mode", lines["mode"]).Error("average needs train.average_every (steps, >= 1)");
  // Averaging sends weights every N steps, not gradients: nothing to encode.
  if (t->mode == M::kAverage && t->compression.enabled())
    return v.Key("compression", lines["compression"]).Error("is not used with mode: average");
  return CheckClipping(v, *t, lines);
}

std::vector<Field> RuleFields(ParameterRule* rule) {
  return {Required(NonEmptyString("match", &rule->match)),
          Bool("ps", &rule->ps),
          Bool("init_in_server", &rule->init_in_server),
          Int("cache_rows", &rule->cache_rows, 0),
          Int("cache_staleness", &rule->cache_staleness, 0),
          Int("admit_after", &rule->admit_after, 0),
          Int("evict_after_steps", &rule->evict_after_steps, 0),
          Int("max_rows", &rule->max_rows, 0, kMaxTableRows),
          Int("server_cache_rows", &rule->server_cache_rows, 0, kMaxTableRows),
          Int("server_cache_bytes", &rule->server_cache_bytes, 0, kMaxServerCacheBytes),
          Section("optimizer", &rule->optimizer, &ReadOptionalOptimizer,
                  &KeysOf<OptimizerConfig, &OptimizerFields>),
          Section("compression", &rule->compression, &ReadOptionalCompression,
                  &KeysOf<CompressionConfig, &CompressionFields>)};
}

Status ReadRule(const Value& v, ParameterRule* rule) {
  std::map<std::string, int> lines;
  PSTRAIN_RETURN_IF_ERROR(ReadMap(v, RuleFields(rule), &lines));
  // Server-held tables send rows, already sparse: threshold encoding is for
  // dense weights.
  if (rule->init_in_server && rule->compression && rule->compression->enabled())
    return v.Key("compression", lines["compression"])
        .Error("is for dense weights; init_in_server tables send only the rows a batch touched");
  // Both settings describe server-held rows; with ps: false there are none.
  const char* server_only = rule->init_in_server          ? "init_in_server"
                            : rule->cache_rows > 0        ? "cache_rows"
                            : rule->admit_after > 0       ? "admit_after"
                            : rule->evict_after_steps > 0 ? "evict_after_steps"
                            : rule->max_rows > 0          ? "max_rows"
                                                          : nullptr;
  if (!rule->ps && server_only != nullptr) {
    return v.Key(server_only, lines[server_only])
        .Error("needs ps: true (with ps: false the parameter is all-reduced among workers)");
  }
  // A memory budget over disk is for the rows of a server-held table.
  for (const char* key : {"server_cache_rows", "server_cache_bytes"}) {
    if (lines.count(key) && !rule->init_in_server)
      return v.Key(key, lines[key])
          .Error("needs init_in_server: true (only server-held tables keep rows on disk)");
  }
  if (rule->server_cache_rows > 0 && rule->server_cache_bytes > 0)
    return v.Key("server_cache_bytes", lines["server_cache_bytes"])
        .Error("give server_cache_rows or server_cache_bytes, not both");
  return Status::OK();
}

Status ReadParameters(const Value& v, std::vector<ParameterRule>* rules) {
  return ReadList(v, "a list of rules", [&](const Value& entry) {
    if (entry.node.IsNull()) return entry.Expected("a mapping");
    ParameterRule& rule = rules->emplace_back();
    rule.line = entry.line;
    PSTRAIN_RETURN_IF_ERROR(ReadRule(entry, &rule));
    for (size_t i = 0; i + 1 < rules->size(); ++i) {
      if ((*rules)[i].match == rule.match) {
        return entry.Key("match", entry.line)
            .Error(fmt::format(
                "'{}' is already matched by {}[{}] (line {}), so this rule never applies",
                rule.match, v.path, i, (*rules)[i].line));
      }
    }
    return Status::OK();
  });
}

// The file's first YAML document and where a second one starts, if any.
struct Documents {
  YAML::Node first;
  std::optional<YAML::Mark> second;  // of its root node
  bool stuck = false;                // the parser stopped reading at `second`
};

// Notes where each document's root node starts.
class RootMarks : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> roots;  // one per document

  void OnDocumentStart(const YAML::Mark&) override { in_root_ = true; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { Node(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { Node(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Node(m);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Node(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Node(m);
  }
  void OnMapEnd() override {}

 private:
  void Node(const YAML::Mark& m) {
    if (in_root_) roots.push_back(m);
    in_root_ = false;
  }
  bool in_root_ = false;
};

// Not YAML::LoadAll: in yaml-cpp 0.7 (Debian 12's) it loops forever, adding
// an empty document each turn, once its parser stops consuming tokens: ",\n"
// is enough (jbeder/yaml-cpp#1040, fixed upstream by #1319). Telling one
// document from more takes at most two documents read.
Documents LoadDocuments(const std::string& yaml_text) {
  Documents out;
  out.first = YAML::Load(yaml_text);
  std::istringstream in(yaml_text);
  YAML::Parser parser(in);
  RootMarks marks;
  for (int i = 0; i < 2 && parser.HandleNextDocument(marks); ++i) {
  }
  if (marks.roots.size() > 1) {
    out.second = marks.roots[1];
    out.stuck = marks.roots[1].pos == marks.roots[0].pos;
  }
  return out;
}

// The sections of the document, read into `config`; `base_dir` as for
// ReadData.
std::vector<Field> DocumentFields(Config* config, const std::string& base_dir) {
  return {{"model",
           [config](const Value& v) {
             config->has_model = true;
             return ReadModel(v, &config->model);
           },
           false, &ModelFieldKeys},
          {"data",
           [config, base_dir](const Value& v) {
             config->has_data = true;
             return ReadData(v, base_dir, &config->data);
           },
           false, &DataFieldKeys},
          Section("train", &config->train, &ReadTrain, &KeysOf<TrainConfig, &TrainFields>),
          Section("parameters", &config->parameters, &ReadParameters,
                  &KeysOf<ParameterRule, &RuleFields>, /*list=*/true)};
}

std::vector<Field> DocumentFieldsNoBase(Config* config) { return DocumentFields(config, ""); }

// Reads the whole document into `config`; `base_dir` as for ReadData.
Status ReadConfig(const Documents& documents, const std::string& yaml_text,
                  const std::string& base_dir, Config* config) {
  const YAML::Node& root = documents.first;
  Value doc{&config->source, root, "", 1};
  if (documents.second) {
    const YAML::Mark& at = *documents.second;
    doc.line = at.line + 1;
    if (documents.stuck && at.pos >= 0 && static_cast<size_t>(at.pos) < yaml_text.size())
      return doc.Error(fmt::format("column {}: invalid YAML: unexpected '{}'", at.column + 1,
                                   yaml_text[at.pos]));
    return doc.Error("expected one YAML document, found a second one");
  }
  if (root.IsNull()) return doc.Error("the config is empty; expected a mapping of sections");
  if (!root.IsMap()) return doc.Expected("a mapping of sections at the top level");
  PSTRAIN_RETURN_IF_ERROR(ReadMap(doc, DocumentFields(config, base_dir)));
  config->data.validation_seed = config->train.seed;
  PSTRAIN_RETURN_IF_ERROR(CheckAcrossSections(doc, config));
  FlattenSettings(root, "", &config->settings);
  return Status::OK();
}

// ParseConfig, resolving relative data paths against `base_dir` (if not empty).
StatusOr<Config> Parse(const std::string& yaml_text, const std::string& source_name,
                       const std::string& base_dir, const ConfigOverrides& overrides) {
  Config config;
  config.source = source_name;
  PSTRAIN_RETURN_IF_ERROR(CheckConfigText(yaml_text, source_name));
  // The readers never call a throwing conversion, so an exception here comes
  // from the parser.
  try {
    Documents documents = LoadDocuments(yaml_text);
    if (!documents.second)
      PSTRAIN_RETURN_IF_ERROR(ApplyOverrides(overrides, source_name, documents.first));
    PSTRAIN_RETURN_IF_ERROR(ReadConfig(documents, yaml_text, base_dir, &config));
    // Checkpoints, like data, are where the config says from its own
    // directory, whichever directory the job was started in.
    if (config.train.checkpoint && !base_dir.empty() &&
        std::filesystem::path(config.train.checkpoint->dir).is_relative())
      config.train.checkpoint->dir =
          (std::filesystem::path(base_dir) / config.train.checkpoint->dir).string();
    if (!config.train.store_dir.empty() && !base_dir.empty() &&
        std::filesystem::path(config.train.store_dir).is_relative())
      config.train.store_dir = (std::filesystem::path(base_dir) / config.train.store_dir).string();
  } catch (const YAML::Exception& e) {
    return InvalidArgument(
        fmt::format("{}:{}: invalid YAML: {}", source_name, std::max(e.mark.line, 0) + 1, e.msg));
  }
  // Before anything the config describes is allocated.
  PSTRAIN_RETURN_IF_ERROR(CheckConfigSizes(config));
  return config;
}

}  // namespace
}  // namespace config_internal

std::vector<std::string> KnownConfigKeys() {
  using config_internal::DocumentFieldsNoBase;
  std::vector<std::string> keys;
  config_internal::ListKeys(config_internal::KeysOf<Config, &DocumentFieldsNoBase>(), "", &keys);
  return keys;
}

StatusOr<Config> ParseConfig(const std::string& yaml_text, const std::string& source_name,
                             const ConfigOverrides& overrides) {
  return config_internal::Parse(yaml_text, source_name, "", overrides);
}

StatusOr<Config> LoadConfig(const std::string& path, const ConfigOverrides& overrides) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    int err = errno;
    std::string message = fmt::format("config {}: {}", path, std::strerror(err));
    return err == ENOENT ? NotFound(message) : InvalidArgument(message);
  }
  std::string text;
  char buffer[1 << 16];
  size_t n;
  // One byte past the cap is enough to refuse the file (CheckConfigText).
  while (text.size() <= kMaxConfigBytes && (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0)
    text.append(buffer, n);
  int err = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (err != 0) return InvalidArgument(fmt::format("config {}: {}", path, std::strerror(err)));
  return config_internal::Parse(text, path, std::filesystem::path(path).parent_path().string(),
                                overrides);
}

bool GlobMatch(const std::string& pattern, const std::string& name) {
  // Backtracks only to the last `*` seen, so the cost is at most
  // pattern size times name size, never exponential.
  size_t p = 0, n = 0;
  size_t star = std::string::npos, star_n = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_n = n;
    } else if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++star_n;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

const ParameterRule* FindParameterRule(const Config& config, const std::string& name) {
  for (const ParameterRule& rule : config.parameters) {
    if (GlobMatch(rule.match, name)) return &rule;
  }
  return nullptr;
}

OptimizerConfig OptimizerFor(const Config& config, const std::string& name) {
  const ParameterRule* rule = FindParameterRule(config, name);
  return rule != nullptr && rule->optimizer ? *rule->optimizer : config.train.optimizer;
}

CompressionConfig CompressionFor(const Config& config, const std::string& name) {
  const ParameterRule* rule = FindParameterRule(config, name);
  return rule != nullptr && rule->compression ? *rule->compression : config.train.compression;
}

bool ChangesWorkersLive(const Config& config) {
  // A compressed exchange and mode average keep per-worker state in
  // checkpoints, and NCCL cannot rebuild its communicator mid-job.
  if (config.train.mode == UpdateMode::kAverage || config.model.device != Device::kCpu ||
      config.train.compression.enabled())
    return false;
  for (const ParameterRule& rule : config.parameters)
    if (rule.compression && rule.compression->enabled()) return false;
  return true;
}

bool FinishesStepsWithoutLostWorkers(const Config& config) {
  // In async and ssp there is no step under way to finish.
  return config.train.mode == UpdateMode::kSync && ChangesWorkersLive(config);
}

bool DropsLostWorkersLive(const Config& config) {
  return (config.train.mode == UpdateMode::kAsync || config.train.mode == UpdateMode::kSsp) &&
         ChangesWorkersLive(config);
}

}  // namespace pstrain
