// The readers of reader.h: one YAML value at a time, a mistake becoming a
// one-line `<source>:<line>: <key>: <what>` error.
#include "src/common/config/reader.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pstrain {
namespace config_internal {

std::string OneLine(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// A value as an error shows it: at most kShownChars bytes of it (Error puts
// it on one line).
std::string Shown(const std::string& value) {
  constexpr size_t kShownChars = 200;
  return value.size() > kShownChars ? value.substr(0, kShownChars) + "..." : value;
}

}  // namespace

Status Value::Expected(std::string_view expected) const {
  std::string got = "nothing";
  if (node.IsScalar()) got = "'" + Shown(node.Scalar()) + "'";
  if (node.IsSequence()) got = "a list";
  if (node.IsMap()) got = "a mapping";
  return Error(fmt::format("expected {}, got {}", expected, got));
}

Field Required(Field f) {
  f.required = true;
  return f;
}

Status ReadMap(const Value& map, const std::vector<Field>& fields,
               std::map<std::string, int>* lines) {
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
      return map.Key(f.key, map.line).Error("required key is missing");
    }
  }
  if (lines != nullptr) *lines = std::move(seen);
  return Status::OK();
}

Status ReadList(const Value& list, std::string_view expected,
                const std::function<Status(const Value& item)>& read) {
  if (list.node.IsNull()) return Status::OK();
  if (!list.node.IsSequence()) return list.Expected(expected);
  size_t index = 0;
  for (const YAML::Node& item : list.node) {
    // A null item has no position of its own; the list's line is close.
    int line = item.IsNull() ? list.line : item.Mark().line + 1;
    PSTRAIN_RETURN_IF_ERROR(
        read(Value{list.source, item, fmt::format("{}[{}]", list.path, index++), line}));
  }
  return Status::OK();
}

Field Uint64(const char* key, uint64_t* out) {
  return {key, [=](const Value& v) {
            if (!v.node.IsScalar() || !ParseNumber(v.node.Scalar(), out)) {
              return v.Expected("an integer >= 0");
            }
            return Status::OK();
          }};
}

Field Float(const char* key, float* out, Bound bound) {
  static const char* const kExpected[] = {"a number > 0", "a number >= 0", "a number in [0, 1)",
                                          "a number <= 0", "a number"};
  return {key, [=](const Value& v) {
            double d = 0;
            bool ok = v.node.IsScalar() && ParseNumber(v.node.Scalar(), &d) &&
                      std::isfinite(static_cast<float>(d));
            // As stored: 1e-50 rounds to 0.0f.
            if (ok && bound == Bound::kPositive) ok = static_cast<float>(d) > 0;
            if (ok && bound == Bound::kNonNegative) ok = d >= 0;
            // As stored: 0.99999999 rounds to 1.0f.
            if (ok && bound == Bound::kUnitInterval) ok = d >= 0 && static_cast<float>(d) < 1;
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

Field Choice(const char* key, std::string* out, const std::vector<const char*>& names) {
  std::vector<std::pair<const char*, std::string>> pairs;
  for (const char* name : names) pairs.emplace_back(name, name);
  return Enum<std::string>(key, out, std::move(pairs));
}

// Every key under `fields` as a path below `prefix` (KnownConfigKeys).
void ListKeys(const std::vector<Field>& fields, const std::string& prefix,
              std::vector<std::string>* out) {
  for (const Field& f : fields) {
    const std::string path = prefix.empty() ? f.key : prefix + "." + f.key;
    out->push_back(path);
    if (f.section != nullptr) ListKeys(f.section(), path + (f.list ? "[]" : ""), out);
  }
}

// ReadList for a list that must have at least one item.
Status ReadNonEmptyList(const Value& v, std::string_view expected,
                        const std::function<Status(const Value& item)>& read) {
  if (v.node.IsNull() || (v.node.IsSequence() && v.node.size() == 0)) {
    return v.Error(fmt::format("expected {}, got {}", expected,
                               v.node.IsNull() ? "nothing" : "an empty list"));
  }
  return ReadList(v, expected, read);
}

// A path or a non-empty list of paths; relative ones are taken from `base_dir`.
Field Strings(const char* key, const char* expected, std::vector<std::string>* out) {
  return {key, [=](const Value& v) {
            auto read_one = [&](const Value& item) {
              return NonEmptyString("", &out->emplace_back()).read(item);
            };
            if (v.node.IsScalar()) return read_one(v);
            return ReadNonEmptyList(v, expected, read_one);
          }};
}

Field Paths(const char* key, const std::string& base_dir, std::vector<std::string>* paths) {
  Field strings = Strings(key, "a path or a non-empty list of paths", paths);
  return {key, [=](const Value& v) {
            PSTRAIN_RETURN_IF_ERROR(strings.read(v));
            if (base_dir.empty()) return Status::OK();
            for (std::string& path : *paths)
              if (std::filesystem::path(path).is_relative())
                path = (std::filesystem::path(base_dir) / path).string();
            return Status::OK();
          }};
}

}  // namespace config_internal
}  // namespace pstrain
