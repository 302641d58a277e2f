// docs/configuration.md against the parser, both ways: every key the parser
// accepts (KnownConfigKeys, listed from the tables that refuse unknown keys)
// is in the doc's key tables, and every key there is one the parser accepts,
// by that list and by ParseConfig itself given the key in a small config.
// The doc's table of layer types holds the keys each type takes
// (KnownLayerKeys), and each of them is accepted for that type.
//
// A key table is a Markdown table whose header is
// `| key | type | default | meaning |`; its first column is the key's path
// in backticks, `{a,b}` standing for two paths
// (`{train,parameters[]}.optimizer.lr`).
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/common/config/config.h"

namespace pstrain {
namespace {

const std::string kDoc = std::string(PSTRAIN_SOURCE_DIR) + "/docs/configuration.md";

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

// The cells of a table row ("| a | b |"), `\|` kept as a character.
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (line[i] == '|') {
      cells.push_back(Trim(cell));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return cells;
}

// The words in backticks in `cell`, in order.
std::vector<std::string> Quoted(const std::string& cell) {
  std::vector<std::string> words;
  for (size_t at = cell.find('`'); at != std::string::npos;) {
    const size_t end = cell.find('`', at + 1);
    if (end == std::string::npos) break;
    words.push_back(cell.substr(at + 1, end - at - 1));
    at = cell.find('`', end + 1);
  }
  return words;
}

// "{a,b}.x" -> "a.x", "b.x" (every brace group, left to right).
std::vector<std::string> Expand(const std::string& path) {
  const size_t open = path.find('{');
  if (open == std::string::npos) return {path};
  const size_t close = path.find('}', open);
  REQUIRE_MESSAGE(close != std::string::npos, "unclosed { in " << path);
  std::vector<std::string> out;
  std::stringstream choices(path.substr(open + 1, close - open - 1));
  for (std::string choice; std::getline(choices, choice, ',');)
    for (const std::string& rest : Expand(path.substr(close + 1)))
      out.push_back(path.substr(0, open) + choice + rest);
  return out;
}

// The rows (cells) of every table in `text` whose header row is `header`.
std::vector<std::vector<std::string>> Tables(const std::string& text,
                                             const std::vector<std::string>& header) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '|') {
      inside = false;
      continue;
    }
    const std::vector<std::string> cells = Cells(line);
    if (cells == header) {
      inside = true;
    } else if (inside && line.rfind("|---", 0) != 0) {
      rows.push_back(cells);
    }
  }
  return rows;
}

std::string ReadDoc() {
  std::ifstream in(kDoc);
  REQUIRE_MESSAGE(in, "cannot read " << kDoc);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct DocumentedKey {
  std::string path;
  std::string type;  // the type column, for a value to try
};

std::vector<DocumentedKey> DocumentedKeys(const std::string& doc) {
  std::vector<DocumentedKey> keys;
  for (const auto& row : Tables(doc, {"key", "type", "default", "meaning"})) {
    REQUIRE_MESSAGE(row.size() == 4, "a key row of " << row.size() << " cells: " << row[0]);
    const std::vector<std::string> quoted = Quoted(row[0]);
    REQUIRE_MESSAGE(quoted.size() == 1, "the key column holds one `path`: " << row[0]);
    for (const std::string& path : Expand(quoted[0])) keys.push_back({path, row[1]});
  }
  return keys;
}

// A value of what the type column says: its first word in backticks (a
// choice), else a number, a bool or a string.
std::string SampleValue(const std::string& type) {
  const std::vector<std::string> quoted = Quoted(type);
  if (!quoted.empty()) return quoted[0];
  if (type.rfind("integer", 0) == 0) return "1";
  if (type.rfind("number", 0) == 0) return "0.5";
  if (type.rfind("true or false", 0) == 0) return "true";
  if (type.rfind("non-empty list of layers", 0) == 0) return "[relu]";
  if (type == "a layer") return "{type: relu}";
  return "x";
}

// `path` ("parameters[].optimizer.lr") set to `value` in a config of one
// flow mapping: {parameters: [{optimizer: {lr: value}}]}.
std::string ConfigWith(const std::string& path, const std::string& value) {
  std::vector<std::string> segments;
  std::stringstream in(path);
  for (std::string s; std::getline(in, s, '.');) segments.push_back(s);
  std::string yaml = value;
  for (size_t i = segments.size(); i-- > 0;) {
    std::string key = segments[i];
    const bool list = key.size() > 2 && key.compare(key.size() - 2, 2, "[]") == 0;
    if (list) key.resize(key.size() - 2);
    yaml = "{" + key + ": " + (list ? "[" + yaml + "]" : yaml) + "}";
  }
  return yaml;
}

// Whether the parser refused a key (rather than its value, or a key missing
// beside it) in `message`.
bool RefusesKey(const std::string& message) {
  return message.find("unknown key") != std::string::npos ||
         message.find("not a key of") != std::string::npos;
}

std::string Joined(const std::set<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += "\n  " + k;
  return out;
}

TEST_CASE("every key the parser accepts is in docs/configuration.md, and no other") {
  const std::vector<DocumentedKey> documented = DocumentedKeys(ReadDoc());
  std::set<std::string> in_doc;
  for (const DocumentedKey& key : documented) {
    INFO("documented twice: " << key.path);
    CHECK(in_doc.insert(key.path).second);
  }
  const std::vector<std::string> known = KnownConfigKeys();
  const std::set<std::string> accepted(known.begin(), known.end());
  REQUIRE(accepted.size() == known.size());
  // What the parser lists, seen from outside: sections and leaves of each.
  REQUIRE(accepted.count("train.optimizer.lr") == 1);
  REQUIRE(accepted.count("model.layers[].type") == 1);
  REQUIRE(accepted.count("parameters[].compression.threshold") == 1);

  std::set<std::string> undocumented, refused;
  for (const std::string& key : accepted)
    if (in_doc.count(key) == 0) undocumented.insert(key);
  for (const std::string& key : in_doc)
    if (accepted.count(key) == 0) refused.insert(key);
  CHECK_MESSAGE(undocumented.empty(), "accepted by the parser, missing from docs/configuration.md:"
                                          << Joined(undocumented));
  CHECK_MESSAGE(refused.empty(),
                "in docs/configuration.md, not a key of the parser:" << Joined(refused));
}

TEST_CASE("the parser takes every documented key, given it in a config") {
  for (const DocumentedKey& key : DocumentedKeys(ReadDoc())) {
    const std::string yaml = ConfigWith(key.path, SampleValue(key.type));
    auto parsed = ParseConfig(yaml, "doc.yaml");
    // An error about the value, or about a key the config leaves out, is
    // fine: the key itself was taken.
    CHECK_MESSAGE((parsed.ok() || !RefusesKey(parsed.status().message())),
                  key.path << ": " << yaml << " -> " << parsed.status().message());
  }
}

TEST_CASE("docs/configuration.md's layer table holds the keys each layer type takes") {
  const std::string doc = ReadDoc();
  std::map<std::string, DocumentedKey> layer_keys;  // "out" -> its row
  for (const DocumentedKey& key : DocumentedKeys(doc)) {
    const std::string prefix = "model.layers[].";
    if (key.path.rfind(prefix, 0) == 0) layer_keys[key.path.substr(prefix.size())] = key;
  }
  std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>> in_doc;
  for (const auto& row : Tables(doc, {"layer", "required keys", "optional keys"})) {
    REQUIRE(row.size() == 3);
    const std::vector<std::string> type = Quoted(row[0]);
    REQUIRE(type.size() == 1);
    const std::vector<std::string> required = Quoted(row[1]), optional = Quoted(row[2]);
    in_doc[type[0]] = {{required.begin(), required.end()}, {optional.begin(), optional.end()}};
  }
  std::set<std::string> types;
  for (const LayerKeys& kind : KnownLayerKeys()) {
    CAPTURE(kind.type);
    types.insert(kind.type);
    REQUIRE_MESSAGE(in_doc.count(kind.type) == 1, "layer type missing from the table");
    const std::set<std::string> required(kind.required.begin(), kind.required.end());
    const std::set<std::string> optional(kind.optional.begin(), kind.optional.end());
    CHECK_MESSAGE(in_doc[kind.type].first == required,
                  "the parser requires:" << Joined(required)
                                         << "\nthe doc says:" << Joined(in_doc[kind.type].first));
    CHECK_MESSAGE(in_doc[kind.type].second == optional,
                  "the parser takes:" << Joined(optional)
                                      << "\nthe doc says:" << Joined(in_doc[kind.type].second));
  }
  for (const auto& [type, keys] : in_doc) {
    CHECK_MESSAGE(types.count(type) == 1, "not a layer type of the parser: " << type);
    // Given its required keys, the type takes each of its documented keys.
    for (const std::set<std::string>* group : {&keys.first, &keys.second})
      for (const std::string& key : *group) {
        REQUIRE_MESSAGE(layer_keys.count(key) == 1, "no row for model.layers[]." << key);
        std::string layer = "{type: " + type;
        for (const std::string& r : keys.first)
          if (r != key) layer += ", " + r + ": " + SampleValue(layer_keys[r].type);
        layer += ", " + key + ": " + SampleValue(layer_keys[key].type) + "}";
        const std::string yaml =
            "{model: {input: [1, 8, 8], sparse_fields: 1, layers: [" + layer + "]}}";
        auto parsed = ParseConfig(yaml, "doc.yaml");
        const std::string message = parsed.ok() ? "" : parsed.status().message();
        CHECK_MESSAGE(!RefusesKey(message), yaml << " -> " << message);
        CHECK_MESSAGE(message.find("model.layers[0]." + key + ":") == std::string::npos,
                      yaml << " -> " << message);
      }
  }
}

}  // namespace
}  // namespace pstrain
