// `pstrain launch`'s own work once the plan is made: one ssh per node,
// every line the nodes print passed on with the node's name in front, and
// the job's exit status at the end.
//
// Ending: the job ends when the scheduler's process does; the others are
// then given the grace period to end by themselves. Ctrl-C (SIGINT) or
// SIGTERM to the launcher stops the job: every node's stdin closes, and the
// remote script (remote_command.h) sends the node SIGTERM, which stops the
// whole job after a common step, as for any node; a second signal ends every
// ssh at once. An ssh that fails (exit 255: the host cannot be reached, the
// key is refused) or a node that cannot be started stops the job the same
// way, and the launcher exits 1 naming the host.
#pragma once

#include <string>
#include <vector>

#include "src/app/launcher/plan.h"
#include "src/app/launcher/remote_command.h"

namespace pstrain {

struct LaunchJob {
  LaunchPlan plan;
  std::vector<std::string> ssh;  // the ssh command and its options; the host follows
  std::string bin;               // pstrain's path on every host
  std::string config_text;       // sent to every node as its PSTRAIN_CONFIG
  EnvList env;                   // what every node gets (ForwardedEnv)
  std::string sched_host;        // the address nodes reach the scheduler at
  int sched_port = 0;
  int grace_s = 30;
};

// Runs the job to its end and returns the launcher's exit status: the
// scheduler's (0 done, 1 failed, 3 stopped), 1 where a node failed while the
// scheduler did not or where ssh failed, 128+N after a second signal N.
int SuperviseLaunch(const LaunchJob& job);

}  // namespace pstrain
