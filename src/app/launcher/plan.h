// Where `pstrain launch` starts each node of a job: the hostfile (or
// --hosts) read into one list of (host, role, rank).
//
// A hostfile has one host per line, `HOST [servers=N] [workers=M]`; `#`
// starts a comment. A line with neither count runs one worker. The job's
// shape is the sum of the counts; ranks follow the file's order (the first
// line's servers are ranks 0..N-1, and so on). The scheduler runs on the
// first host unless the launcher is told another.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "src/common/config/options.h"
#include "src/common/status.h"

namespace pstrain {

struct LaunchNode {
  std::string host;  // as ssh is given it: a name, an address or user@host
  Role role = Role::kWorker;
  int rank = 0;  // within its role; the scheduler's is 0
};

struct LaunchPlan {
  int servers = 0;
  int workers = 0;
  // The scheduler first, then every server and every worker in rank order.
  std::vector<LaunchNode> nodes;
};

// The most nodes of one role a hostfile may ask for: far beyond any job a
// scheduler holds, small enough that a typo cannot make the launcher fork
// without end.
inline constexpr int kMaxLaunchNodes = 100000;

// Reads a hostfile's text; `source` names it in errors ("hosts.txt:3: ...").
// `scheduler_host`: empty for the first line's host.
StatusOr<LaunchPlan> PlanFromHostfile(std::string_view text, const std::string& source,
                                      const std::string& scheduler_host);
// --hosts h1,h2,...: `servers` and `workers` dealt out over the hosts in
// turn (server 0 on h1, server 1 on h2, ...; the same for workers).
StatusOr<LaunchPlan> PlanFromHosts(const std::vector<std::string>& hosts, int servers, int workers,
                                   const std::string& scheduler_host);

// `text` as a whole number from 0 to `max`; the error starts with `what`.
StatusOr<int> ParseWholeNumber(std::string_view text, const std::string& what, int max);

// "host1 (server 0)": how the launcher names a node in its lines.
std::string LaunchNodeName(const LaunchNode& node);

// OK when `host` can be handed to ssh as a host: not empty, no whitespace or
// shell or option characters (a leading '-' would be read as an option).
Status CheckLaunchHost(std::string_view host);

}  // namespace pstrain
