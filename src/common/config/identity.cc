#include "src/common/config/identity.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string_view>

#include "src/common/config/reader.h"
#include "src/common/random.h"

namespace pstrain {
namespace config_internal {

// Only ever called on a document ReadConfig accepted, whose depth the known
// sections bound.
void FlattenSettings(const YAML::Node& node, const std::string& path,
                     std::map<std::string, std::string>* out) {
  if (node.IsScalar()) {
    (*out)[path] = OneLine(node.Scalar());
  } else if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = OneLine(kv.first.IsScalar() ? kv.first.Scalar() : "?");
      FlattenSettings(kv.second, path.empty() ? key : path + "." + key, out);
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      FlattenSettings(node[i], fmt::format("{}[{}]", path, i), out);
  }
  // A null (a key with nothing under it) counts as not set, like its absence.
}

}  // namespace config_internal

namespace {

// Whether `key` is `prefix` or lies under it ("train.optimizer.lr" under
// "train.optimizer", "data.train[0]" under "data.train").
bool Under(std::string_view key, std::string_view prefix) {
  if (key.substr(0, prefix.size()) != prefix) return false;
  return key.size() == prefix.size() || key[prefix.size()] == '.' || key[prefix.size()] == '[';
}

bool UnderAny(std::string_view key, std::initializer_list<std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [key](std::string_view p) { return Under(key, p); });
}

std::string Line(const std::string& key, const std::string& value) {
  return key + ": " + value + "\n";
}

}  // namespace

std::string JobConfigText(const Config& config) {
  std::string text;
  for (const auto& [key, value] : config.settings) {
    const bool local = std::any_of(std::begin(kNodeLocalKeys), std::end(kNodeLocalKeys),
                                   [&key = key](const char* k) { return Under(key, k); });
    if (!local) text += Line(key, value);
  }
  if (text.size() <= kMaxJobConfigText) return text;
  return Line("config.digest", fmt::format("{:016x}", HashString(text)));
}

std::string JobIdentityText(const Config& config) {
  std::string text;
  for (const auto& [key, value] : config.settings) {
    if (Under(key, "data.train")) {
      // The files, wherever this node mounts them.
      text += Line(key, std::filesystem::path(value).filename().string());
      continue;
    }
    const bool decides_model =
        UnderAny(key, {"model", "parameters", "train.optimizer", "train.compression",
                       "train.clip_norm", "train.mode", "train.staleness", "train.average_every",
                       "train.seed", "train.batch_size", "data.format", "data.vocab", "data.limit",
                       "data.shuffle", "data.columns", "data.delimiter", "data.header",
                       "data.on_bad_row", "data.validation_fraction"});
    const bool memory =
        key.find("cache_rows") != std::string::npos || key.find("cache_bytes") != std::string::npos;
    if (decides_model && !memory) text += Line(key, value);
  }
  return text;
}

}  // namespace pstrain
