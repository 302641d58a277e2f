// What `pstrain launch` runs on each host through ssh, and what it sends.
//
// The command line ssh carries is public on the remote host (ps shows it),
// so it holds only a small fixed script, the binary's path and the grace
// period. The job itself (the node's environment, MS_CLUSTER_TOKEN
// included, and the config's text) goes over ssh's stdin as two base64
// lines; the script writes them to a private temporary folder, starts the
// node, and then keeps reading stdin: when the launcher closes it (Ctrl-C, a
// failed host) or its ssh connection ends, the script sends the node
// SIGTERM (the job stops after a common step, as for any node), and SIGKILL
// after the grace period. The folder is removed when the node ends.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/app/launcher/plan.h"

namespace pstrain {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// The remote script could not start the node (no mktemp, no base64, the job
// not received); the launcher names the host.
inline constexpr int kRemoteSetupFailed = 125;

// `sh -c '<script>' pstrain-launch '<bin>' <grace_s>`, as one string.
std::string RemoteCommand(const std::string& bin, int grace_s);

// The two lines the script reads first: the environment as shell
// assignments, and the config, each base64-encoded.
std::string JobPayload(const EnvList& env, std::string_view config_text);

// The variables every node of the job gets from the launcher's own
// environment `environ_lines` ("NAME=value"): every MS_* and PSTRAIN_* one
// except those that name one node (MS_ROLE, MS_NODE_ID, MS_NODE_RANK,
// MS_NODE_HOST, MS_NODE_PORT, PSTRAIN_BIND_HOST) and those the launcher sets
// (the shape, the scheduler's address, PSTRAIN_CONFIG), plus `extra` names.
EnvList ForwardedEnv(const std::vector<std::string>& environ_lines,
                     const std::vector<std::string>& extra);

// `job` plus what makes it this node: its role, rank, the shape and the
// scheduler's address.
EnvList NodeEnv(const EnvList& job, const LaunchPlan& plan, const LaunchNode& node,
                const std::string& sched_host, int sched_port);

// 'text' with every ' written as '\'' : one word to any POSIX shell.
std::string ShellQuote(std::string_view text);

std::string Base64(std::string_view bytes);

}  // namespace pstrain
