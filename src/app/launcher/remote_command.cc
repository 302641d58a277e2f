#include "src/app/launcher/remote_command.h"

#include <fmt/format.h>

#include <algorithm>

namespace pstrain {
namespace {

// $1: the pstrain binary; $2: seconds between SIGTERM and SIGKILL. Exit
// status: the node's, or kRemoteSetupFailed. POSIX sh: no single quotes in
// it, since it travels inside them. `read` takes one line of a pipe and
// nothing more, so stdin stays the launcher's lifeline afterwards. An
// asynchronous list's stdin is /dev/null in a shell without job control,
// hence the lifeline is kept on fd 3 for the watcher.
constexpr char kScript[] = R"(umask 077
d=$(mktemp -d "${TMPDIR:-/tmp}/pstrain-launch.XXXXXX") || exit 125
trap "rm -rf \"$d\"" EXIT
IFS= read -r e && IFS= read -r c || { echo "pstrain launch: the job did not arrive" >&2; exit 125; }
printf %s "$e" | base64 -d > "$d/env" && printf %s "$c" | base64 -d > "$d/job.yaml" || exit 125
. "$d/env" || exit 125
export PSTRAIN_CONFIG="$d/job.yaml"
exec 3<&0
"$1" < /dev/null 3<&- &
p=$!
{ cat <&3 > /dev/null; kill -TERM $p; sleep "$2"; kill -KILL $p; } > /dev/null 2>&1 &
w=$!
wait $p
s=$?
kill $w 2> /dev/null
exit $s)";

bool IsNodeOwn(const std::string& name) {
  static const char* const kOwn[] = {"MS_ROLE",       "MS_NODE_ID",    "MS_NODE_RANK",
                                     "MS_NODE_HOST",  "MS_NODE_PORT",  "PSTRAIN_BIND_HOST",
                                     "MS_SERVER_NUM", "MS_WORKER_NUM", "MS_SCHED_HOST",
                                     "MS_SCHED_PORT", "PSTRAIN_CONFIG"};
  return std::find(std::begin(kOwn), std::end(kOwn), name) != std::end(kOwn);
}

bool IsShellName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

std::string ShellQuote(std::string_view text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string Base64(std::string_view bytes) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 2]);
    out += kDigits[(n >> 18) & 63];
    out += kDigits[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kDigits[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kDigits[n & 63] : '=';
  }
  return out;
}

std::string RemoteCommand(const std::string& bin, int grace_s) {
  return fmt::format("sh -c {} pstrain-launch {} {}", ShellQuote(kScript), ShellQuote(bin),
                     grace_s);
}

std::string JobPayload(const EnvList& env, std::string_view config_text) {
  std::string assignments;
  for (const auto& [name, value] : env)
    assignments += fmt::format("export {}={}\n", name, ShellQuote(value));
  return Base64(assignments) + "\n" + Base64(config_text) + "\n";
}

EnvList ForwardedEnv(const std::vector<std::string>& environ_lines,
                     const std::vector<std::string>& extra) {
  EnvList env;
  for (const std::string& line : environ_lines) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string name = line.substr(0, eq);
    bool ours = name.rfind("MS_", 0) == 0 || name.rfind("PSTRAIN_", 0) == 0;
    bool asked = std::find(extra.begin(), extra.end(), name) != extra.end();
    if (!IsShellName(name) || IsNodeOwn(name) || !(ours || asked)) continue;
    env.emplace_back(name, line.substr(eq + 1));
  }
  return env;
}

EnvList NodeEnv(const EnvList& job, const LaunchPlan& plan, const LaunchNode& node,
                const std::string& sched_host, int sched_port) {
  EnvList env = job;
  const char* role = node.role == Role::kScheduler ? "MS_SCHED"
                     : node.role == Role::kServer  ? "MS_PSERVER"
                                                   : "MS_WORKER";
  env.emplace_back("MS_ROLE", role);
  env.emplace_back("MS_SERVER_NUM", std::to_string(plan.servers));
  env.emplace_back("MS_WORKER_NUM", std::to_string(plan.workers));
  env.emplace_back("MS_SCHED_HOST", sched_host);
  env.emplace_back("MS_SCHED_PORT", std::to_string(sched_port));
  if (node.role != Role::kScheduler) env.emplace_back("MS_NODE_RANK", std::to_string(node.rank));
  return env;
}

}  // namespace pstrain
