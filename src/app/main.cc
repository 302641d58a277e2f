// pstrain: one executable for every role of a parameter-server training job.
//
//   pstrain [flags]          run as the role in MS_ROLE (or --role)
//   pstrain local [flags]    run a whole job on this machine
//   pstrain --help           explain roles, variables and subcommands
//
// Exit status: 0 the job (or role) finished; 1 it failed at run time; 2 the
// command line or environment was wrong (nothing was started); 3 it was
// stopped on request (SIGTERM or SIGINT to any node: every node stops after
// one common step, with a checkpoint when configured); 128+N a second
// signal N ended it at once.
#include <cstdio>
#include <string>
#include <vector>

#include "comm/security.h"
#include "comm/tls.h"
#include "roles/local_job.h"
#include "roles/recovery.h"
#include "roles/scheduler.h"
#include "roles/server.h"
#include "roles/trainer.h"
#include "roles/worker.h"
#include "src/app/bench.h"
#include "src/app/commands.h"
#include "src/app/usage.h"
#include "src/common/config.h"
#include "src/common/logging.h"
#include "src/common/options.h"
#include "src/data/gen_cli.h"

namespace pstrain {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitStopped = 3;  // SIGTERM / SIGINT: stopped cleanly before the end

int UsageError(const Status& status) {
  std::fprintf(stderr, "pstrain: %s\n", status.message().c_str());
  return kExitUsage;
}

int Finished(const Logger& log, const Status& status) {
  if (status.ok()) return 0;
  if (status.code() == StatusCode::kCancelled) {
    log->warn("{}", status.message());
    return kExitStopped;
  }
  log->error("{}", status.message());
  return kExitFailed;
}

// Bad TLS files are a usage error (exit 2) found before any node starts;
// each node then loads its own context from the same files.
Status CheckTlsFiles(const TlsFiles& files) { return TlsContext::LoadIfSet(files).status(); }

// The job's config, or defaults when no --config / PSTRAIN_CONFIG is given.
StatusOr<Config> ConfigOf(const std::string& path) {
  if (path.empty()) return Config{};
  return LoadConfig(path);
}

// The worker's job: training when the config has a model, else none (the
// workers only take part in the handshake). Config errors surface here,
// before any node starts.
StatusOr<std::unique_ptr<WorkerJob>> JobOf(const Config& config) {
  if (!config.has_model) return std::unique_ptr<WorkerJob>();
  auto job = TrainJob::Create(config);
  if (!job.ok()) return job.status();
  return std::unique_ptr<WorkerJob>(std::move(*job));
}

// How a run of `role` ended; its state goes here, logged when the job was
// paused (a rollback that hangs in a teardown then shows where).
template <typename RoleT>
Incarnation DropState(const Logger& log, std::unique_ptr<RoleT> role, const Status& status) {
  Incarnation ended{status, role->paused(), role->rank()};
  if (ended.paused) log->info("dropping this node's state to roll back");
  role.reset();
  return ended;
}

// Once per process, not per node or incarnation.
void WarnIfUnauthenticated(const Logger& log, const ClusterOptions& cluster) {
  if (cluster.token.empty()) log->warn("{}", kUnauthenticatedWarning);
}

int RunRole(const std::vector<std::string>& args) {
  auto options = ParseNodeOptions(args, ProcessEnv());
  if (!options.ok()) return UsageError(options.status());
  if (Status tls = CheckTlsFiles(options->cluster.tls); !tls.ok()) return UsageError(tls);
  auto config = ConfigOf(options->config_path);
  if (!config.ok()) return UsageError(config.status());
  options->cluster.recovery_wait_s = config->train.RecoveryWaitSeconds();
  switch (options->role) {
    case Role::kScheduler: {
      Logger log = MakeLogger("scheduler");
      WarnIfUnauthenticated(log, options->cluster);
      Scheduler scheduler(options->cluster, log);
      auto port = scheduler.Start();
      if (!port.ok()) return Finished(log, port.status());
      return Finished(log, scheduler.Wait());
    }
    case Role::kServer: {
      Logger log = MakeLogger("server");
      WarnIfUnauthenticated(log, options->cluster);
      return Finished(
          log, RunRecovering(*options, *config, log, [&log](const NodeOptions& o, const Config& c) {
            Server server(o, log, c);
            Status st = server.Run();
            return Incarnation{st, server.paused(), server.rank()};
          }));
    }
    case Role::kWorker: {
      // Config errors surface here, before the node joins.
      if (auto job = JobOf(*config); !job.ok()) return UsageError(job.status());
      Logger log = MakeLogger("worker");
      WarnIfUnauthenticated(log, options->cluster);
      return Finished(
          log, RunRecovering(*options, *config, log, [&log](const NodeOptions& o, const Config& c) {
            auto job = JobOf(c);
            if (!job.ok()) return Incarnation{job.status()};
            Worker worker(o, log, c, std::move(*job));
            Status st = worker.Run();
            return Incarnation{st, worker.paused(), worker.rank()};
          }));
    }
  }
  return kExitFailed;
}

int RunLocal(const std::vector<std::string>& args) {
  auto options = ParseLocalOptions(args, ProcessEnv());
  if (!options.ok()) return UsageError(options.status());
  if (Status tls = CheckTlsFiles(options->cluster.tls); !tls.ok()) return UsageError(tls);
  auto config = ConfigOf(options->config_path);
  if (!config.ok()) return UsageError(config.status());
  if (auto check = JobOf(*config); !check.ok()) return UsageError(check.status());
  LocalJobOptions job;
  job.cluster = options->cluster;
  job.config = *config;
  job.make_job = [config = *config](int) { return std::move(JobOf(config).value()); };
  Logger log = MakeLogger("local");
  WarnIfUnauthenticated(log, job.cluster);
  log->info("running a job of {} servers and {} workers on this machine", job.cluster.server_num,
            job.cluster.worker_num);
  Status status = RunLocalJob(job);
  if (status.ok()) log->info("the job finished");
  return Finished(log, status);
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty()) {
    const std::string& first = args[0];
    if (first == "--help" || first == "-h" || first == "help") {
      std::fputs(pstrain::UsageText(), stdout);
      return 0;
    }
    if (first == "--version") {
      std::puts("pstrain 0.1.0");
      return 0;
    }
    if (first == "local") return pstrain::RunLocal({args.begin() + 1, args.end()});
    if (first == "bench") return pstrain::RunBench({args.begin() + 1, args.end()});
    if (first == "gen") return pstrain::RunGen({args.begin() + 1, args.end()});
    // Temporary, until the cli helper's main.cc is merged.
    if (first == "check" && args.size() == 3 && args[1] == "--config")
      return pstrain::RunCheck(pstrain::CheckOptions{args[2]});
  }
  return pstrain::RunRole(args);
}
