#include "src/common/config/overrides.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <optional>

#include "src/common/config/reader.h"
#include "src/common/config/text.h"

namespace pstrain {
namespace {

// One step of a key path: `name` or `name[index]`.
struct PathStep {
  std::string name;
  std::optional<size_t> index;
};

struct ParsedSet {
  std::string key;  // as written, for errors
  std::vector<PathStep> path;
  std::string value;
};

// Longest index taken: more digits than this cannot name an item.
constexpr size_t kMaxIndexDigits = 9;
// The most nodes, and the deepest nesting, of one --set's value: YAML
// aliases could otherwise make a short value huge, or contain itself.
constexpr int64_t kMaxValueNodes = 10000;
constexpr int kMaxValueDepth = 32;

StatusOr<ParsedSet> ParseSet(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument(config_internal::OneLine(
        fmt::format("--set '{}': {} (as in --set train.epochs=2)", text, why)));
  };
  PSTRAIN_RETURN_IF_ERROR(CheckConfigText(text, "--set '" + config_internal::OneLine(text) + "'"));
  const size_t equals = text.find('=');
  if (equals == std::string::npos) return bad("expected KEY=VALUE");
  ParsedSet out{text.substr(0, equals), {}, text.substr(equals + 1)};
  if (out.key.empty()) return bad("no key before '='");
  size_t at = 0;
  while (at <= out.key.size()) {
    size_t end = out.key.find('.', at);
    if (end == std::string::npos) end = out.key.size();
    const std::string step = out.key.substr(at, end - at);
    PathStep parsed;
    const size_t bracket = step.find('[');
    parsed.name = step.substr(0, bracket);
    if (parsed.name.empty()) return bad("an empty step in the key");
    for (char c : parsed.name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
        return bad(fmt::format("'{}' is not a key name (letters, digits, _)", parsed.name));
    if (bracket != std::string::npos) {
      const std::string digits = step.substr(bracket + 1, step.size() - bracket - 2);
      bool ok = step.back() == ']' && !digits.empty() && digits.size() <= kMaxIndexDigits;
      for (char c : digits) ok = ok && std::isdigit(static_cast<unsigned char>(c));
      if (!ok) return bad(fmt::format("'{}': expected name[index], index a whole number", step));
      parsed.index = std::stoul(digits);
    }
    out.path.push_back(std::move(parsed));
    at = end + 1;
  }
  return out;
}

// The same value built afresh into *out: its nodes carry no position in any
// text, so the config's reader names them as a --set's (reader.h). False
// past kMaxValueNodes nodes in all (`budget`) or kMaxValueDepth deep.
bool Unmarked(const YAML::Node& node, int depth, int64_t* budget, YAML::Node* out) {
  if (--*budget < 0 || depth > kMaxValueDepth) return false;
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      *out = YAML::Node(node.Scalar());
      return true;
    case YAML::NodeType::Sequence: {
      YAML::Node list(YAML::NodeType::Sequence);
      for (const YAML::Node& item : node) {
        YAML::Node copy;
        if (!Unmarked(item, depth + 1, budget, &copy)) return false;
        list.push_back(copy);
      }
      *out = list;
      return true;
    }
    case YAML::NodeType::Map: {
      YAML::Node map(YAML::NodeType::Map);
      for (const auto& entry : node) {
        YAML::Node key, value;
        if (!Unmarked(entry.first, depth + 1, budget, &key) ||
            !Unmarked(entry.second, depth + 1, budget, &value))
          return false;
        map[key] = value;
      }
      *out = map;
      return true;
    }
    default:
      *out = YAML::Node(YAML::NodeType::Null);
      return true;
  }
}

Status Apply(const ParsedSet& set, const std::string& source, YAML::Node root) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument(config_internal::OneLine(fmt::format("--set {}: {}", set.key, why)));
  };
  YAML::Node value;
  try {
    int64_t budget = kMaxValueNodes;
    if (!Unmarked(YAML::Load(set.value), 0, &budget, &value))
      return bad(fmt::format("'{}' holds more than {} values or nests deeper than {}", set.value,
                             kMaxValueNodes, kMaxValueDepth));
  } catch (const YAML::Exception& e) {
    return bad(fmt::format("'{}' is not a YAML value: {}", set.value, e.msg));
  }
  YAML::Node at = root;
  std::string walked;
  for (size_t i = 0; i < set.path.size(); ++i) {
    const PathStep& step = set.path[i];
    const bool last = i + 1 == set.path.size();
    if (!at.IsMap())
      return bad(fmt::format("{} in {} is not a mapping", walked.empty() ? "the document" : walked,
                             source));
    walked += (walked.empty() ? "" : ".") + step.name;
    if (last && !step.index) {
      // Written afresh, key and value: an error about it names the --set,
      // not the line of the file that had it.
      at.remove(step.name);
      at[YAML::Node(step.name)] = value;
      return Status::OK();
    }
    YAML::Node child = at[step.name];
    if (!step.index) {
      if (!child.IsDefined() || child.IsNull()) at[step.name] = YAML::Node(YAML::NodeType::Map);
      at.reset(at[step.name]);
      continue;
    }
    if (!child.IsDefined() || !child.IsSequence() || *step.index >= child.size())
      return bad(fmt::format("{} has no item {}: {} lists {}", walked, *step.index, source,
                             child.IsSequence() ? fmt::format("{}", child.size()) : "none"));
    walked += fmt::format("[{}]", *step.index);
    if (last) {
      child[*step.index] = value;
      return Status::OK();
    }
    at.reset(child[*step.index]);
  }
  return Status::OK();
}

}  // namespace

Status CheckOverrides(const ConfigOverrides& overrides) {
  if (overrides.sets.size() > kMaxConfigSets)
    return InvalidArgument(
        fmt::format("{} --set: at most {} are taken", overrides.sets.size(), kMaxConfigSets));
  for (const std::string& text : overrides.sets) {
    auto set = ParseSet(text);
    if (!set.ok()) return set.status();
  }
  return Status::OK();
}

namespace config_internal {

Status ApplyOverrides(const ConfigOverrides& overrides, const std::string& source,
                      YAML::Node root) {
  PSTRAIN_RETURN_IF_ERROR(CheckOverrides(overrides));
  if (!root.IsMap()) return Status::OK();  // the reader says what is wrong
  for (const std::string& text : overrides.sets)
    PSTRAIN_RETURN_IF_ERROR(Apply(ParseSet(text).value(), source, root));
  if (overrides.resume) {
    YAML::Node train = root["train"];
    if (!train.IsMap() || !train["checkpoint"].IsMap())
      return InvalidArgument(fmt::format(
          "--resume: {} has no train.checkpoint to resume from (add one, with its dir)", source));
    return Apply(
        ParsedSet{
            "train.checkpoint.resume", {{"train", {}}, {"checkpoint", {}}, {"resume", {}}}, "true"},
        source, root);
  }
  return Status::OK();
}

}  // namespace config_internal
}  // namespace pstrain
