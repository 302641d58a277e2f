#include "src/app/launcher/plan.h"

#include <fmt/format.h>

#include <charconv>
#include <map>

namespace pstrain {
namespace {

struct HostLine {
  std::string host;
  int servers = 0;
  int workers = 0;
};

StatusOr<int> ParseCount(std::string_view value, std::string_view key) {
  return ParseWholeNumber(value, fmt::format("{}={}", key, value), kMaxLaunchNodes);
}

std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

StatusOr<HostLine> ParseHostLine(std::string_view line) {
  std::vector<std::string_view> words = Words(line);
  HostLine parsed;
  parsed.host = std::string(words[0]);
  if (Status st = CheckLaunchHost(parsed.host); !st.ok()) return st;
  bool counted = false;
  for (size_t i = 1; i < words.size(); ++i) {
    std::string_view word = words[i];
    size_t eq = word.find('=');
    std::string_view key = word.substr(0, eq == std::string_view::npos ? word.size() : eq);
    if (eq == std::string_view::npos || (key != "servers" && key != "workers"))
      return InvalidArgument(
          fmt::format("'{}': expected servers=N or workers=M after the host", word));
    auto n = ParseCount(word.substr(eq + 1), key);
    if (!n.ok()) return n.status();
    (key == "servers" ? parsed.servers : parsed.workers) = *n;
    counted = true;
  }
  if (!counted) parsed.workers = 1;
  return parsed;
}

// The scheduler on `scheduler_host` (empty: the first line's host), then
// `role_hosts`: each server's host in rank order, then each worker's.
StatusOr<LaunchPlan> MakePlan(const std::string& scheduler_host,
                              const std::vector<std::string>& server_hosts,
                              const std::vector<std::string>& worker_hosts) {
  if (worker_hosts.empty()) return InvalidArgument("no workers: a job needs at least one");
  if (server_hosts.size() > kMaxLaunchNodes || worker_hosts.size() > kMaxLaunchNodes)
    return InvalidArgument(fmt::format("more than {} servers or workers", kMaxLaunchNodes));
  if (Status st = CheckLaunchHost(scheduler_host); !st.ok()) return st;
  LaunchPlan plan;
  plan.servers = static_cast<int>(server_hosts.size());
  plan.workers = static_cast<int>(worker_hosts.size());
  plan.nodes.push_back({scheduler_host, Role::kScheduler, 0});
  for (int r = 0; r < plan.servers; ++r) plan.nodes.push_back({server_hosts[r], Role::kServer, r});
  for (int r = 0; r < plan.workers; ++r) plan.nodes.push_back({worker_hosts[r], Role::kWorker, r});
  return plan;
}

}  // namespace

StatusOr<int> ParseWholeNumber(std::string_view text, const std::string& what, int max) {
  int n = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 0 || n > max)
    return InvalidArgument(fmt::format("{}: expected a whole number from 0 to {}", what, max));
  return n;
}

Status CheckLaunchHost(std::string_view host) {
  if (host.empty()) return InvalidArgument("an empty host");
  if (host.size() > 255)
    return InvalidArgument(fmt::format("host '{}...': too long", host.substr(0, 32)));
  if (host[0] == '-')
    return InvalidArgument(fmt::format("host '{}': a host may not start with '-'", host));
  for (char c : host) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_' || c == ':' || c == '@' || c == '[' || c == ']';
    if (!ok)
      return InvalidArgument(
          fmt::format("host '{}': only letters, digits and . - _ : @ [ ] may name a host", host));
  }
  return Status::OK();
}

StatusOr<LaunchPlan> PlanFromHostfile(std::string_view text, const std::string& source,
                                      const std::string& scheduler_host) {
  std::vector<HostLine> lines;
  std::map<std::string, int> line_of;  // host -> the line that named it
  int number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    if (Words(line).empty()) continue;
    auto parsed = ParseHostLine(line);
    if (!parsed.ok()) return parsed.status().WithContext(fmt::format("{}:{}", source, number));
    auto [it, fresh] = line_of.emplace(parsed->host, number);
    if (!fresh)
      return InvalidArgument(fmt::format("{}:{}: host {} is listed already on line {}", source,
                                         number, parsed->host, it->second));
    lines.push_back(std::move(*parsed));
  }
  if (lines.empty()) return InvalidArgument(fmt::format("{}: no hosts", source));
  // Counts are checked per line, so these sums stay far from overflow.
  std::vector<std::string> server_hosts, worker_hosts;
  for (const HostLine& line : lines) {
    if (server_hosts.size() + line.servers > kMaxLaunchNodes ||
        worker_hosts.size() + line.workers > kMaxLaunchNodes)
      return InvalidArgument(
          fmt::format("{}: more than {} servers or workers", source, kMaxLaunchNodes));
    server_hosts.insert(server_hosts.end(), line.servers, line.host);
    worker_hosts.insert(worker_hosts.end(), line.workers, line.host);
  }
  auto plan = MakePlan(scheduler_host.empty() ? lines.front().host : scheduler_host, server_hosts,
                       worker_hosts);
  if (!plan.ok()) return plan.status().WithContext(source);
  return plan;
}

StatusOr<LaunchPlan> PlanFromHosts(const std::vector<std::string>& hosts, int servers, int workers,
                                   const std::string& scheduler_host) {
  if (hosts.empty()) return InvalidArgument("--hosts: no hosts");
  if (servers < 0 || workers < 0 || servers > kMaxLaunchNodes || workers > kMaxLaunchNodes)
    return InvalidArgument(fmt::format("--servers and --workers: from 0 to {}", kMaxLaunchNodes));
  std::map<std::string, int> seen;
  for (const std::string& host : hosts) {
    if (Status st = CheckLaunchHost(host); !st.ok()) return st.WithContext("--hosts");
    if (!seen.emplace(host, 0).second)
      return InvalidArgument(fmt::format("--hosts: {} is listed twice", host));
  }
  std::vector<std::string> server_hosts, worker_hosts;
  for (int i = 0; i < servers; ++i) server_hosts.push_back(hosts[i % hosts.size()]);
  for (int i = 0; i < workers; ++i) worker_hosts.push_back(hosts[i % hosts.size()]);
  auto plan =
      MakePlan(scheduler_host.empty() ? hosts.front() : scheduler_host, server_hosts, worker_hosts);
  if (!plan.ok()) return plan.status().WithContext("--hosts");
  return plan;
}

std::string LaunchNodeName(const LaunchNode& node) {
  if (node.role == Role::kScheduler) return fmt::format("{} (scheduler)", node.host);
  return fmt::format("{} ({} {})", node.host, RoleName(node.role), node.rank);
}

}  // namespace pstrain
