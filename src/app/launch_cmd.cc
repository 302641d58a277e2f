// pstrain launch: a whole job on several hosts over ssh (src/app/launcher/).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "src/app/cli.h"
#include "src/app/launcher/plan.h"
#include "src/app/launcher/remote_command.h"
#include "src/app/launcher/supervisor.h"
#include "src/common/config/config.h"
#include "src/common/config/options.h"

extern char** environ;

namespace pstrain {
namespace {

constexpr int kExitUsage = 2;
constexpr int kDefaultSchedPort = 8081;  // as launch/defaults.sh
// The config travels to every node on one line of ssh's stdin.
constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;

struct LaunchFlags {
  std::string hostfile;
  std::vector<std::string> hosts;
  int servers = -1, workers = -1;
  std::string config_path;
  std::string scheduler_host, sched_addr;
  int sched_port = 0;
  std::string ssh = "ssh -o BatchMode=yes";
  std::string bin;
  std::vector<std::string> env_names;
  int grace_s = 30;
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "pstrain launch: %s\n", message.c_str());
  return kExitUsage;
}

StatusOr<std::string> ReadSmallFile(const std::string& path, const char* what) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return NotFound(fmt::format("{} {}: {}", what, path, ec.message()));
  if (size > kMaxConfigBytes)
    return InvalidArgument(
        fmt::format("{} {}: {} bytes, more than {}", what, path, size, kMaxConfigBytes));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return InvalidArgument(fmt::format("{} {}: cannot be read", what, path));
  return text.str();
}

// Every node reads the config from a temporary folder of its own host: a
// relative path in it would point there.
Status CheckAbsolutePaths(const Config& config) {
  std::vector<std::pair<std::string, std::string>> paths;
  for (const std::string& p : config.data.train) paths.emplace_back("data.train", p);
  for (const std::string& p : config.data.test) paths.emplace_back("data.test", p);
  if (config.train.checkpoint)
    paths.emplace_back("train.checkpoint.dir", config.train.checkpoint->dir);
  if (!config.train.store_dir.empty())
    paths.emplace_back("train.store_dir", config.train.store_dir);
  for (const auto& [key, path] : paths)
    if (std::filesystem::path(path).is_relative())
      return InvalidArgument(fmt::format(
          "{} is '{}', a relative path: pstrain launch sends the config to every host, so "
          "give paths as the hosts see them, from /",
          key, path));
  return Status::OK();
}

// A whole number from 0 to `max` in the variable `name`.
StatusOr<int> ParseEnvInt(const std::string& text, const char* name, int max) {
  return ParseWholeNumber(text, fmt::format("{} is '{}'", name, text), max);
}

size_t DistinctHosts(const LaunchPlan& plan) {
  std::set<std::string> hosts;
  for (const LaunchNode& node : plan.nodes) hosts.insert(node.host);
  return hosts.size();
}

std::vector<std::string> SplitWords(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::vector<std::string> EnvironLines() {
  std::vector<std::string> lines;
  for (char** e = environ; *e != nullptr; ++e) lines.emplace_back(*e);
  return lines;
}

std::string OwnBinary() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("pstrain") : path.string();
}

}  // namespace

int RunLaunchCli(const std::vector<std::string>& args) {
  LaunchFlags f;
  const EnvLookup env = ProcessEnv();
  CLI::App app(
      "Starts a whole job on several hosts over ssh: the scheduler, every server and every "
      "worker, each in its place, with this job's MS_* and PSTRAIN_* variables and its config; "
      "prints every node's lines prefixed with host, role and rank; exits as the job does. "
      "Ctrl-C stops the job on every host.",
      "pstrain launch");
  auto* hostfile = app.add_option("--hostfile", f.hostfile,
                                  "lines 'HOST [servers=N] [workers=M]' (a bare HOST: one worker)");
  auto* hosts = app.add_option("--hosts", f.hosts, "hosts to deal --servers and --workers over")
                    ->delimiter(',');
  hostfile->excludes(hosts);
  app.add_option("--servers", f.servers, "with --hosts: servers (default MS_SERVER_NUM, else 2)");
  app.add_option("--workers", f.workers, "with --hosts: workers (default MS_WORKER_NUM, else 2)");
  app.add_option("--config", f.config_path, "the job's YAML config (default PSTRAIN_CONFIG)");
  app.add_option("--scheduler", f.scheduler_host,
                 "the host the scheduler runs on (default: the first)");
  app.add_option("--sched-addr", f.sched_addr,
                 "the address nodes reach the scheduler at (default: its host, without user@)");
  app.add_option("--sched-port", f.sched_port,
                 "the scheduler's port (default MS_SCHED_PORT, else 8081)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--ssh", f.ssh, "the ssh command and its options, split at spaces")
      ->capture_default_str();
  app.add_option("--bin", f.bin, "pstrain's path on the hosts (default: this binary's path)");
  app.add_option("--env", f.env_names, "also pass this variable to every node (repeatable)");
  app.add_option("--grace-s", f.grace_s,
                 "seconds a stopping node gets before SIGKILL, and the others after the "
                 "scheduler ends")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  if (int status = ParseCommandLine(&app, args); status >= 0) return status;

  if (f.hostfile.empty() && f.hosts.empty()) return Usage("--hostfile or --hosts is required");
  auto count = [&](int flag, const char* var) -> StatusOr<int> {
    if (flag >= 0) return flag;
    auto text = env(var);
    return text ? ParseEnvInt(*text, var, kMaxLaunchNodes) : StatusOr<int>(2);
  };
  StatusOr<LaunchPlan> plan = InvalidArgument("no plan");
  if (!f.hostfile.empty()) {
    if (f.servers >= 0 || f.workers >= 0)
      return Usage("--servers and --workers go with --hosts; a hostfile gives them per host");
    auto text = ReadSmallFile(f.hostfile, "hostfile");
    if (!text.ok()) return Usage(text.status().message());
    plan = PlanFromHostfile(*text, f.hostfile, f.scheduler_host);
  } else {
    auto servers = count(f.servers, "MS_SERVER_NUM");
    auto workers = count(f.workers, "MS_WORKER_NUM");
    if (!servers.ok()) return Usage(servers.status().message());
    if (!workers.ok()) return Usage(workers.status().message());
    plan = PlanFromHosts(f.hosts, *servers, *workers, f.scheduler_host);
  }
  if (!plan.ok()) return Usage(plan.status().message());

  if (f.config_path.empty()) f.config_path = env("PSTRAIN_CONFIG").value_or("");
  if (f.config_path.empty()) return Usage("--config (or PSTRAIN_CONFIG) is required");
  auto config_text = ReadSmallFile(f.config_path, "config");
  if (!config_text.ok()) return Usage(config_text.status().message());
  auto config = ParseConfig(*config_text, f.config_path);
  if (!config.ok()) return Usage(config.status().message());
  if (Status st = CheckAbsolutePaths(*config); !st.ok())
    return Usage(fmt::format("{}: {}", f.config_path, st.message()));

  LaunchJob job;
  job.plan = std::move(*plan);
  job.ssh = SplitWords(f.ssh);
  if (job.ssh.empty()) return Usage("--ssh is empty");
  job.bin = f.bin.empty() ? OwnBinary() : f.bin;
  job.config_text = std::move(*config_text);
  job.env = ForwardedEnv(EnvironLines(), f.env_names);
  std::string sched = job.plan.nodes.front().host;
  job.sched_host = f.sched_addr.empty() ? sched.substr(sched.find('@') + 1) : f.sched_addr;
  job.sched_port = f.sched_port;
  if (job.sched_port == 0) {
    auto port = env("MS_SCHED_PORT");
    auto n = port ? ParseEnvInt(*port, "MS_SCHED_PORT", 65535) : StatusOr<int>(kDefaultSchedPort);
    if (!n.ok()) return Usage(n.status().message());
    if (*n == 0) return Usage("MS_SCHED_PORT is 0: the nodes need a port to reach");
    job.sched_port = *n;
  }
  job.grace_s = f.grace_s;
  std::fprintf(stderr,
               "pstrain launch: %d servers and %d workers on %zu hosts, scheduler at %s:%d\n",
               job.plan.servers, job.plan.workers, DistinctHosts(job.plan), job.sched_host.c_str(),
               job.sched_port);
  return SuperviseLaunch(job);
}

}  // namespace pstrain
