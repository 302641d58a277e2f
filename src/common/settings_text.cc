#include "src/common/settings_text.h"

#include <fmt/format.h>

#include <map>
#include <string_view>
#include <utility>

namespace pstrain {
namespace {

// "key: value" lines back into a map (the value is all after the first ": ").
std::map<std::string, std::string> ParseLines(std::string_view text) {
  std::map<std::string, std::string> settings;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    size_t colon = line.find(": ");
    if (colon != std::string_view::npos)
      settings[std::string(line.substr(0, colon))] = std::string(line.substr(colon + 2));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return settings;
}

}  // namespace

std::string DescribeConfigDifference(const std::string& a, const std::string& a_name,
                                     const std::string& b, const std::string& b_name,
                                     int max_keys) {
  const auto left = ParseLines(a), right = ParseLines(b);
  std::map<std::string, std::pair<std::string, std::string>> differ;
  for (const auto& [key, value] : left) {
    auto it = right.find(key);
    if (it == right.end() || it->second != value)
      differ[key] = {value, it == right.end() ? "not set" : it->second};
  }
  for (const auto& [key, value] : right)
    if (left.count(key) == 0) differ[key] = {"not set", value};
  std::string out;
  int shown = 0;
  for (const auto& [key, values] : differ) {
    if (shown == max_keys) {
      out += fmt::format("; and {} more", differ.size() - shown);
      break;
    }
    out += fmt::format("{}{} is {} {}, {} {}", shown == 0 ? "" : "; ", key, values.first, a_name,
                       values.second, b_name);
    ++shown;
  }
  return out;
}

}  // namespace pstrain
