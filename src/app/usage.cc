#include "src/app/usage.h"

#include <fmt/format.h>

#include "src/common/config/options.h"

namespace pstrain {

std::string UsageText(const std::vector<Subcommand>& subcommands) {
  std::string text = R"(pstrain: a parameter-server trainer for neural networks.

Usage:
  pstrain [flags]            run one node; its role comes from MS_ROLE (or --role)
)";
  for (const Subcommand& s : subcommands) {
    text += fmt::format("  pstrain {} {}\n      {}\n", s.name, s.synopsis, s.summary);
  }
  text += R"(  pstrain --help             this text (each subcommand has its own --help)
  pstrain --version          the version and the build options

Roles (MS_ROLE / --role):
  MS_SCHED                 the scheduler: nodes register with it, it assigns ranks
                           (servers and workers each from 0), wires the topology,
                           runs barriers, watches heartbeats and ends the job
  MS_PSERVER (MS_SERVER)   a parameter server: holds a shard of the PS-managed weights
  MS_WORKER                a worker: computes gradients, pushes and pulls weights,
                           all-reduces the ps: false ones with the other workers;
                           it needs the job's config (--config or PSTRAIN_CONFIG)

Each flag below overrides its variable (Env:...). With no argument and no
MS_ROLE, pstrain prints this text and exits 2.
PSTRAIN_LOG_LEVEL applies to every subcommand.

)";
  text += NodeOptionsHelp();
  text += R"(
Exit status: 0 finished; 1 failed while running; 2 bad command line, environment,
config, or data that does not fit the model; 3 stopped on request (SIGTERM or SIGINT).

Scheduler log lines (stable, for grep):
  The server node id:<id>,node ip: <ip>,node port:<port> assign rank id:<r>
  The worker node id:<id>,node ip: <ip>,node port:<port> assign rank id:<r>
  Start the scheduler node is successful!
)";
  return text;
}

}  // namespace pstrain
