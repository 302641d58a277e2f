// Internal to the config parser (config.cc, model.cc; implemented in
// reader.cc): the pieces that read one YAML value and turn a mistake into a
// `<source>:<line>: <key>: <what>` error. Nothing outside src/common includes
// this; yaml-cpp stays behind it.
//
// Each section's keys are one vector of Fields, built by a function over the
// struct it fills (TrainFields, LayerFields, ...): ReadMap refuses any key
// not in it, and KnownConfigKeys lists the same vectors, so the keys a user
// may write are written down once.
//
// Readers only inspect nodes (IsScalar, Scalar, iteration, Mark) and never
// call a throwing conversion, so the only exceptions come from the parser.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/common/config/model_config.h"
#include "src/common/status.h"

namespace pstrain {
struct Config;  // src/common/config/config.h
namespace config_internal {

// `text` on one line: line breaks and tabs (in a key or a block scalar)
// written as \n, \r and \t, so that an error stays one line.
std::string OneLine(std::string_view text);

// A node of the document and what an error about it must name.
struct Value {
  const std::string* source;
  YAML::Node node;
  std::string path;  // "train.optimizer.lr", "parameters[2]"; empty for the document
  int line;          // 1-based

  Status Error(std::string_view what) const {
    // No line: a --set wrote it, or the mapping it is in
    // (src/common/config/overrides.h).
    if (line <= 0 && !path.empty())
      return InvalidArgument(OneLine(fmt::format("{}: {} (from --set): {}", *source, path, what)));
    if (path.empty())
      return InvalidArgument(OneLine(fmt::format("{}:{}: {}", *source, line, what)));
    return InvalidArgument(OneLine(fmt::format("{}:{}: {}: {}", *source, line, path, what)));
  }
  // "expected <expected>, got '<text>'"
  Status Expected(std::string_view expected) const;
  // The same node under `key` of this one, at `line`, for errors about a key
  // found by ReadMap's `lines`.
  Value Key(std::string_view key, int at_line) const {
    return {source, node, path.empty() ? std::string(key) : path + "." + std::string(key), at_line};
  }
};

struct Field;

// The fields of a section, built on a throwaway struct (KeysOf) for their
// keys alone: KnownConfigKeys lists them and never calls their readers.
using SectionFields = std::vector<Field> (*)();

// One key a mapping may hold, and how to read its value.
struct Field {
  const char* key;
  std::function<Status(const Value&)> read;
  bool required = false;
  // When the value is a section (a mapping, or with `list` a list of
  // mappings): the fields it takes. The same vectors ReadMap refuses unknown
  // keys by, so that KnownConfigKeys (config.h) cannot miss one.
  SectionFields section = nullptr;
  bool list = false;
};

// `build`'s fields over a T that is never read or written, for SectionFields.
template <typename T, std::vector<Field> (*build)(T*)>
std::vector<Field> KeysOf() {
  static T* const unused = new T();
  return build(unused);
}

Field Required(Field f);

// Reads a mapping (null counts as empty): each key through its Field, once.
// Unknown, duplicate and missing required keys are errors. `lines`, when
// given, receives the line of each key present, for checks across keys.
Status ReadMap(const Value& map, const std::vector<Field>& fields,
               std::map<std::string, int>* lines = nullptr);

// Calls `read` on each item of a list (null counts as empty), with the item's
// path ("parameters[2]") and line. `expected` names what the list should be,
// for the error when `list` is something else.
Status ReadList(const Value& list, std::string_view expected,
                const std::function<Status(const Value& item)>& read);

// ReadList for a list that must have at least one item.
Status ReadNonEmptyList(const Value& v, std::string_view expected,
                        const std::function<Status(const Value& item)>& read);

// A string or a non-empty list of strings (each non-empty); `expected`
// names them for the error ("a path or a non-empty list of paths").
Field Strings(const char* key, const char* expected, std::vector<std::string>* out);
// A path or a non-empty list of paths; relative ones are taken from `base_dir`.
Field Paths(const char* key, const std::string& base_dir, std::vector<std::string>* paths);

// Every key under `fields`, and under their sections, as a path below
// `prefix` ("train.optimizer.lr", "parameters[].match"): KnownConfigKeys.
void ListKeys(const std::vector<Field>& fields, const std::string& prefix,
              std::vector<std::string>* out);

// Every scalar under `node` by key path into `out` (Config::settings), the
// path of `node` itself being `path` ("" for the document).
void FlattenSettings(const YAML::Node& node, const std::string& path,
                     std::map<std::string, std::string>* out);

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

Field Uint64(const char* key, uint64_t* out);

// Allowed ranges of float fields.
enum class Bound { kPositive, kNonNegative, kUnitInterval /* [0, 1) */, kNonPositive, kAny };

Field Float(const char* key, float* out, Bound bound);
Field Bool(const char* key, bool* out);
Field NonEmptyString(const char* key, std::string* out);

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

// An enum spelled `name(e)` for each of `values`, listed in that order when
// the value is none of them.
template <typename E>
Field Enum(const char* key, E* out, std::initializer_list<E> values, const char* (*name)(E)) {
  std::vector<std::pair<const char*, E>> names;
  for (E e : values) names.emplace_back(name(e), e);
  return Enum(key, out, std::move(names));
}

// A string that must be one of `names`, kept as written.
Field Choice(const char* key, std::string* out, const std::vector<const char*>& names);

// A field whose value is read by `read`: a nested section, a mapping whose
// keys are `fields` (or with `list`, a list of such mappings).
template <typename T>
Field Section(const char* key, T* out, Status (*read)(const Value&, T*), SectionFields fields,
              bool list = false) {
  return {key, [=](const Value& v) { return read(v, out); }, false, fields, list};
}

// The `model:` (model.cc) and `data:` (data.cc) sections. `base_dir`, when not empty,
// is the directory relative data paths are resolved against.
Status ReadModel(const Value& v, ModelConfig* model);
Status ReadData(const Value& v, const std::string& base_dir, DataConfig* data);
// Their keys, for SectionFields.
std::vector<Field> ModelFieldKeys();
std::vector<Field> DataFieldKeys();

// The checks between sections of the whole document `doc`, once each is
// read (cross_checks.cc), then BindColumnTables.
Status CheckAcrossSections(const Value& doc, Config* config);
// The columns' `table:` names bound to the model's embedding_bag layers:
// fills LayerConfig::slots and ColumnConfig::vocab (column_tables.cc).
Status BindColumnTables(const Value& doc, Config* config);
// The line of `key` in the mapping `map` (which ReadMap read, so it holds it).
int KeyLine(const YAML::Node& map, const char* key);

}  // namespace config_internal
}  // namespace pstrain
