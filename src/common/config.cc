#include "src/common/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

namespace pstrain {
namespace {

// A node of the document and what an error about it must name.
struct Value {
  const std::string* source;
  YAML::Node node;
  std::string path;  // "train.optimizer.lr", "parameters[2]"; empty for the document
  int line;          // 1-based

  Status Error(std::string_view what) const {
    if (path.empty()) return InvalidArgument(fmt::format("{}:{}: {}", *source, line, what));
    return InvalidArgument(fmt::format("{}:{}: {}: {}", *source, line, path, what));
  }
  // "expected <expected>, got '<text>'"
  Status Expected(std::string_view expected) const {
    std::string got = "nothing";
    if (node.IsScalar()) got = "'" + node.Scalar() + "'";
    if (node.IsSequence()) got = "a list";
    if (node.IsMap()) got = "a mapping";
    return Error(fmt::format("expected {}, got {}", expected, got));
  }
};

// One key a mapping may hold, and how to read its value.
struct Field {
  const char* key;
  std::function<Status(const Value&)> read;
  bool required = false;
};

Field Required(Field f) {
  f.required = true;
  return f;
}

// Reads a mapping (null counts as empty): each key through its Field, once.
// Unknown, duplicate and missing required keys are errors. `lines`, when
// given, receives the line of each key present, for checks across keys.
Status ReadMap(const Value& map, const std::vector<Field>& fields,
               std::map<std::string, int>* lines = nullptr) {
  if (!map.node.IsNull() && !map.node.IsMap()) return map.Expected("a mapping");
  std::map<std::string, int> seen;
  for (const auto& entry : map.node) {
    const YAML::Node& key = entry.first;
    int line = key.Mark().line + 1;
    if (!key.IsScalar()) return Value{map.source, key, map.path, line}.Expected("a key name");
    Value value{map.source, entry.second,
                map.path.empty() ? key.Scalar() : map.path + "." + key.Scalar(), line};
    auto [first, inserted] = seen.emplace(key.Scalar(), line);
    if (!inserted)
      return value.Error(fmt::format("duplicate key (first at line {})", first->second));
    const Field* field = nullptr;
    for (const Field& f : fields) {
      if (key.Scalar() == f.key) field = &f;
    }
    if (field == nullptr) {
      std::string allowed;
      for (const Field& f : fields) allowed += (allowed.empty() ? "" : ", ") + std::string(f.key);
      return value.Error(fmt::format("unknown key (allowed: {})", allowed));
    }
    PSTRAIN_RETURN_IF_ERROR(field->read(value));
  }
  for (const Field& f : fields) {
    if (f.required && seen.count(f.key) == 0) {
      std::string path = map.path.empty() ? f.key : map.path + "." + f.key;
      return Value{map.source, map.node, path, map.line}.Error("required key is missing");
    }
  }
  if (lines != nullptr) *lines = std::move(seen);
  return Status::OK();
}

// Parses all of `text` as a number; false on anything else.
template <typename T>
bool ParseNumber(const std::string& text, T* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

template <typename T>
Field Int(const char* key, T* out, int64_t lo, int64_t hi = std::numeric_limits<T>::max(),
          int64_t multiple_of = 1) {
  std::string expected = hi == std::numeric_limits<T>::max()
                             ? fmt::format("an integer >= {}", lo)
                             : fmt::format("an integer in {}..{}", lo, hi);
  if (multiple_of > 1) expected += fmt::format(", a multiple of {}", multiple_of);
  return {key, [=](const Value& v) {
            int64_t n = 0;
            if (!v.node.IsScalar() || !ParseNumber(v.node.Scalar(), &n) || n < lo || n > hi ||
                n % multiple_of != 0) {
              return v.Expected(expected);
            }
            *out = static_cast<T>(n);
            return Status::OK();
          }};
}

Field Uint64(const char* key, uint64_t* out) {
  return {key, [=](const Value& v) {
            if (!v.node.IsScalar() || !ParseNumber(v.node.Scalar(), out)) {
              return v.Expected("an integer >= 0");
            }
            return Status::OK();
          }};
}

// Allowed ranges of float fields.
enum class Bound { kPositive, kNonNegative, kUnitInterval /* [0, 1) */, kNonPositive };

Field Float(const char* key, float* out, Bound bound) {
  static const char* const kExpected[] = {"a number > 0", "a number >= 0", "a number in [0, 1)",
                                          "a number <= 0"};
  return {key, [=](const Value& v) {
            double d = 0;
            bool ok = v.node.IsScalar() && ParseNumber(v.node.Scalar(), &d) &&
                      std::isfinite(static_cast<float>(d));
            if (ok && bound == Bound::kPositive) ok = d > 0;
            if (ok && bound == Bound::kNonNegative) ok = d >= 0;
            if (ok && bound == Bound::kUnitInterval) ok = d >= 0 && d < 1;
            if (ok && bound == Bound::kNonPositive) ok = d <= 0;
            if (!ok) return v.Expected(kExpected[static_cast<int>(bound)]);
            *out = static_cast<float>(d);
            return Status::OK();
          }};
}

Field Bool(const char* key, bool* out) {
  return {key, [=](const Value& v) {
            // yaml-cpp's as<bool> takes true/false, yes/no, on/off and leaves
            // the fallback in place for anything else, without throwing.
            if (v.node.IsScalar()) {
              bool parsed_true = v.node.as<bool>(true), parsed_false = v.node.as<bool>(false);
              if (parsed_true == parsed_false) {
                *out = parsed_true;
                return Status::OK();
              }
            }
            return v.Expected("true or false");
          }};
}

Field NonEmptyString(const char* key, std::string* out) {
  return {key, [=](const Value& v) {
            if (!v.node.IsScalar() || v.node.Scalar().empty())
              return v.Expected("a non-empty string");
            *out = v.node.Scalar();
            return Status::OK();
          }};
}

template <typename E>
Field Enum(const char* key, E* out, std::vector<std::pair<const char*, E>> names) {
  return {key, [=](const Value& v) {
            std::string choices;
            for (const auto& [name, e] : names) {
              if (v.node.IsScalar() && v.node.Scalar() == name) {
                *out = e;
                return Status::OK();
              }
              choices += (choices.empty() ? "" : "|") + std::string(name);
            }
            return v.Expected("one of " + choices);
          }};
}

// A field whose value is read by `read` (a nested section).
template <typename T>
Field Section(const char* key, T* out, Status (*read)(const Value&, T*)) {
  return {key, [=](const Value& v) { return read(v, out); }};
}

Field Ignored(const char* key) {
  return {key, [](const Value&) { return Status::OK(); }};
}

Status ReadOptimizer(const Value& v, OptimizerConfig* out) {
  *out = OptimizerConfig{};
  using T = OptimizerType;
  return ReadMap(
      v, {Required(Enum<T>("type", &out->type,
                           {{"sgd", T::kSgd},
                            {"momentum", T::kMomentum},
                            {"adam", T::kAdam},
                            {"adagrad", T::kAdagrad},
                            {"ftrl", T::kFtrl}})),
          Float("lr", &out->lr, Bound::kPositive),
          Float("weight_decay", &out->weight_decay, Bound::kNonNegative),
          Float("momentum", &out->momentum, Bound::kUnitInterval), Bool("nesterov", &out->nesterov),
          Float("beta1", &out->beta1, Bound::kUnitInterval),
          Float("beta2", &out->beta2, Bound::kUnitInterval),
          Float("epsilon", &out->epsilon, Bound::kPositive),
          Float("initial_accumulator", &out->initial_accumulator, Bound::kNonNegative),
          Float("lr_power", &out->lr_power, Bound::kNonPositive),
          Float("l1", &out->l1, Bound::kNonNegative), Float("l2", &out->l2, Bound::kNonNegative)});
}

Status ReadOptionalOptimizer(const Value& v, std::optional<OptimizerConfig>* out) {
  return ReadOptimizer(v, &out->emplace());
}

Status ReadCheckpoint(const Value& v, std::optional<CheckpointConfig>* out) {
  CheckpointConfig& c = out->emplace();
  return ReadMap(v, {Required(NonEmptyString("dir", &c.dir)), Int("every_steps", &c.every_steps, 0),
                     Bool("resume", &c.resume), Int("keep", &c.keep, 1)});
}

Status ReadTrain(const Value& v, TrainConfig* t) {
  using M = UpdateMode;
  std::map<std::string, int> lines;
  PSTRAIN_RETURN_IF_ERROR(ReadMap(
      v,
      {Int("epochs", &t->epochs, 1), Int("batch_size", &t->batch_size, 1, 1 << 20),
       Int("steps", &t->steps, 0),
       Enum<M>("mode", &t->mode, {{"sync", M::kSync}, {"async", M::kAsync}, {"ssp", M::kSsp}}),
       Int("staleness", &t->staleness, 0), Section("optimizer", &t->optimizer, &ReadOptimizer),
       Uint64("seed", &t->seed), Int("log_every", &t->log_every, 1),
       Int("partition_bytes", &t->partition_bytes, 4096, int64_t{1} << 30, 4),
       Section("checkpoint", &t->checkpoint, &ReadCheckpoint)},
      &lines));
  // A bound the chosen mode ignores is a mistake the user would not notice.
  if (t->staleness != 0 && t->mode != M::kSsp) {
    return Value{v.source, v.node, v.path + ".staleness", lines["staleness"]}.Error(
        fmt::format("{} is only used with mode: ssp", t->staleness));
  }
  return Status::OK();
}

Status ReadRule(const Value& v, ParameterRule* rule) {
  std::map<std::string, int> lines;
  PSTRAIN_RETURN_IF_ERROR(ReadMap(
      v,
      {Required(NonEmptyString("match", &rule->match)), Bool("ps", &rule->ps),
       Bool("init_in_server", &rule->init_in_server), Int("cache_rows", &rule->cache_rows, 0),
       Section("optimizer", &rule->optimizer, &ReadOptionalOptimizer)},
      &lines));
  // Both settings describe server-held rows; with ps: false there are none.
  const char* server_only = rule->init_in_server   ? "init_in_server"
                            : rule->cache_rows > 0 ? "cache_rows"
                                                   : nullptr;
  if (!rule->ps && server_only != nullptr) {
    return Value{v.source, v.node, v.path + "." + server_only, lines[server_only]}.Error(
        "needs ps: true (with ps: false the parameter is all-reduced among workers)");
  }
  return Status::OK();
}

Status ReadParameters(const Value& v, std::vector<ParameterRule>* rules) {
  if (v.node.IsNull()) return Status::OK();
  if (!v.node.IsSequence()) return v.Expected("a list of rules");
  for (const YAML::Node& item : v.node) {
    // A null item has no position of its own; the list's line is close.
    int line = item.IsNull() ? v.line : item.Mark().line + 1;
    Value entry{v.source, item, fmt::format("{}[{}]", v.path, rules->size()), line};
    if (item.IsNull()) return entry.Expected("a mapping");
    ParameterRule& rule = rules->emplace_back();
    rule.line = line;
    PSTRAIN_RETURN_IF_ERROR(ReadRule(entry, &rule));
    for (size_t i = 0; i + 1 < rules->size(); ++i) {
      if ((*rules)[i].match == rule.match) {
        return Value{v.source, item, entry.path + ".match", line}.Error(
            fmt::format("'{}' is already matched by {}[{}] (line {}), so this rule never applies",
                        rule.match, v.path, i, (*rules)[i].line));
      }
    }
  }
  return Status::OK();
}

}  // namespace

StatusOr<Config> ParseConfig(const std::string& yaml_text, const std::string& source_name) {
  Config config;
  config.source = source_name;
  // The readers only inspect nodes and never call a throwing conversion, so
  // an exception here comes from the parser.
  try {
    std::vector<YAML::Node> documents = YAML::LoadAll(yaml_text);
    YAML::Node root = documents.empty() ? YAML::Node() : documents[0];
    Value doc{&config.source, root, "", 1};
    if (documents.size() > 1) {
      doc.line = documents[1].Mark().line + 1;
      return doc.Error("expected one YAML document, found a second one");
    }
    if (root.IsNull()) return doc.Error("the config is empty; expected a mapping of sections");
    if (!root.IsMap()) return doc.Expected("a mapping of sections at the top level");
    PSTRAIN_RETURN_IF_ERROR(ReadMap(
        doc, {Ignored("model"), Ignored("data"), Section("train", &config.train, &ReadTrain),
              Section("parameters", &config.parameters, &ReadParameters)}));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(
        fmt::format("{}:{}: invalid YAML: {}", source_name, std::max(e.mark.line, 0) + 1, e.msg));
  }
  return config;
}

StatusOr<Config> LoadConfig(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    int err = errno;
    std::string message = fmt::format("config {}: {}", path, std::strerror(err));
    return err == ENOENT ? NotFound(message) : InvalidArgument(message);
  }
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  int err = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (err != 0) return InvalidArgument(fmt::format("config {}: {}", path, std::strerror(err)));
  return ParseConfig(text, path);
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

}  // namespace pstrain
