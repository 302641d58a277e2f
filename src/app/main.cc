// pstrain: one executable for every role of a parameter-server training job.
//
//   pstrain [flags]          run as the role in MS_ROLE (or --role)
//   pstrain local [flags]    run a whole job on this machine
//   pstrain launch [flags]   run a whole job on several hosts over ssh
//   pstrain <subcommand> ... bench, gen, export, eval, check, plot (kSubcommands)
//   pstrain --help           explain roles, variables and subcommands
//   pstrain --version        the version and the build options
//
// Exit status: 0 the job (or role) finished; 1 it failed at run time; 2 the
// command line or environment was wrong (nothing was started); 3 it was
// stopped on request (SIGTERM or SIGINT to any node: every node stops after
// one common step, with a checkpoint when configured); 128+N a second
// signal N ended it at once.
#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "comm/transport/security.h"
#include "comm/transport/tls.h"
#include "roles/local_job.h"
#include "roles/node/recovery.h"
#include "roles/scheduler/scheduler.h"
#include "roles/server/server.h"
#include "roles/worker/data_cache.h"
#include "roles/worker/trainer.h"
#include "roles/worker/worker.h"
#include "src/app/bench/bench.h"
#include "src/app/cli.h"
#include "src/app/usage.h"
#include "src/common/config/config.h"
#include "src/common/config/identity.h"
#include "src/common/config/options.h"
#include "src/common/logging.h"
#include "src/common/network_mask.h"
#include "src/common/open_files.h"
#include "src/data/dataset.h"
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

// PSTRAIN_LOG_LEVEL for every subcommand; a role's or local's --log-level
// overrides it once parsed (ApplyLogLevel).
Status ApplyLogLevel(const std::string& text, const char* source) {
  auto level = ParseLogLevel(text);
  if (!level)
    return InvalidArgument(
        fmt::format("{} is '{}': expected trace, debug, info, warn, error or off", source, text));
  SetDefaultLogLevel(*level);
  return Status::OK();
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

// The job's config with the command line's changes, or defaults when no
// --config / PSTRAIN_CONFIG is given.
StatusOr<Config> ConfigOf(const std::string& path, const ConfigOverrides& overrides) {
  if (path.empty() && !overrides.empty())
    return InvalidArgument("--set and --resume change a config: pass --config or PSTRAIN_CONFIG");
  if (path.empty()) return Config{};
  return LoadConfig(path, overrides);
}

// The worker's job: training the config's model. Config errors surface
// here, before any node starts; with `check_data`, so does data that does
// not fit the model (the first batch of every file is read). Exit 0 means
// a model was trained, so a worker without one is refused.
StatusOr<std::unique_ptr<WorkerJob>> JobOf(const Config& config, bool check_data) {
  if (config.source.empty())
    return InvalidArgument("no model is configured: pass --config or PSTRAIN_CONFIG");
  if (config.has_data)
    PSTRAIN_RETURN_IF_ERROR(CheckDataFiles(config.data).WithContext(config.source));
  auto job = TrainJob::Create(config);
  if (!job.ok()) return job.status();
  if (check_data) PSTRAIN_RETURN_IF_ERROR((*job)->CheckData());
  return std::unique_ptr<WorkerJob>(std::move(*job));
}

// The last resort for an allocation that fails where nothing reports what
// it was for (the readers, the batches and the model's build do): one line
// naming the role, exit 1, instead of an abort.
template <typename Fn>
int ReportingOutOfMemory(const char* who, Fn run) {
  try {
    return run();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "pstrain: %s: out of memory (std::bad_alloc)\n", who);
    return kExitFailed;
  }
}

// Memory or threads running out on a thread other than main (the event
// loop, a server's update threads, `pstrain local`'s nodes), where no caller
// is left to turn it into a Status: one line and exit 1, not an abort.
// Anything else that reaches here is a bug, and aborts as it would have.
[[noreturn]] void StopOnExhaustion() {
  std::string why;
  if (std::exception_ptr error = std::current_exception()) {
    try {
      std::rethrow_exception(error);
    } catch (const std::bad_alloc&) {
      why = "out of memory (std::bad_alloc)";
    } catch (const std::system_error& e) {
      if (e.code() == std::errc::resource_unavailable_try_again)
        why = fmt::format("a thread could not start ({}): out of memory or over a process limit",
                          e.what());
    } catch (...) {
    }
  }
  if (why.empty()) std::abort();
  std::fprintf(stderr, "pstrain: %s: the process stops\n", why.c_str());
  std::fflush(nullptr);
  std::_Exit(kExitFailed);
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

// --help or -h anywhere among a role's or local's flags (their parsers
// take values only).
bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

// One node of the job, as `options` and `config` say.
int RunNode(const NodeOptions& options, const Config& config) {
  switch (options.role) {
    case Role::kScheduler: {
      Logger log = MakeLogger("scheduler");
      WarnIfUnauthenticated(log, options.cluster);
      Scheduler scheduler(options.cluster, log);
      auto port = scheduler.Start();
      if (!port.ok()) return Finished(log, port.status());
      return Finished(log, scheduler.Wait());
    }
    case Role::kServer: {
      Logger log = MakeLogger("server");
      WarnIfUnauthenticated(log, options.cluster);
      return Finished(
          log,
          RunRecovering(options, config, log,
                        [&log](const NodeOptions& o, const Config& c, NodeMemory recalled) {
                          Server server(o, log, c);
                          server.Recall(std::move(recalled));
                          Status st = server.Run();
                          return Incarnation{st, server.paused(), server.rank(), server.Kept()};
                        }));
    }
    case Role::kWorker: {
      // Config errors and data that does not fit surface here, before the
      // node joins.
      if (auto job = JobOf(config, /*check_data=*/true); !job.ok()) return UsageError(job.status());
      Logger log = MakeLogger("worker");
      WarnIfUnauthenticated(log, options.cluster);
      // Kept across runs: a rollback or a change of shape reads no data again.
      auto data = std::make_shared<DataCache>();
      if (config.train.elastic) data->Preload(config.data);
      return Finished(
          log,
          RunRecovering(options, config, log,
                        [&log, data](const NodeOptions& o, const Config& c, NodeMemory recalled) {
                          auto job = JobOf(c, /*check_data=*/false);
                          if (!job.ok()) return Incarnation{job.status(), false, -1, {}};
                          Worker worker(o, log, c, std::move(*job));
                          worker.Recall(std::move(recalled));
                          worker.KeepDataIn(data);
                          Status st = worker.Run();
                          return Incarnation{st, worker.paused(), worker.rank(), worker.Kept()};
                        }));
    }
  }
  return kExitFailed;
}

// What a role and `local` do first: the log level, the TLS files and the
// config (defaults when none is given); `cluster` takes the config's text,
// which every node of the job must share (src/common/config/identity.h).
StatusOr<Config> PrepareNodes(ClusterOptions* cluster, const std::string& config_path,
                              const ConfigOverrides& overrides) {
  PSTRAIN_RETURN_IF_ERROR(ApplyLogLevel(cluster->log_level, "--log-level"));
  PSTRAIN_RETURN_IF_ERROR(CheckTlsFiles(cluster->tls));
  auto config = ConfigOf(config_path, overrides);
  if (!config.ok()) return config.status();
  cluster->job_config = JobConfigText(*config);
  cluster->job_config_source = config->source;
  const int replicas = config->train.replication.replicas;
  if (replicas > 0 && replicas >= cluster->server_num)
    return InvalidArgument(fmt::format(
        "{}: train.replication.replicas {} needs at least {} servers (each backup on another "
        "server), but the job has {} (MS_SERVER_NUM, --servers)",
        config->source, replicas, replicas + 1, cluster->server_num));
  cluster->replicas = replicas;
  return config;
}

int RunRole(const std::vector<std::string>& args) {
  auto options = ParseNodeOptions(args, ProcessEnv());
  if (!options.ok()) return UsageError(options.status());
  auto config = PrepareNodes(&options->cluster, options->config_path, options->config_overrides);
  if (!config.ok()) return UsageError(config.status());
  auto chosen_host = ApplyNetworkMask(&*options, LocalInterfaceAddresses());
  if (!chosen_host.ok()) return UsageError(chosen_host.status());
  if (!chosen_host->empty()) MakeLogger(RoleName(options->role))->info("{}", *chosen_host);
  options->cluster.recovery_wait_s = config->train.RecoveryWaitSeconds();
  options->cluster.max_failed_link_rollbacks = config->train.MaxFailedLinkRollbacks();
  if (const auto& e = config->train.elastic) {
    // Workers change live where a worker's samples do not depend on its
    // rank (roles/scheduler/live_workers.cc).
    const bool by_index = !SplitsTrainByFile(config->data);
    options->cluster.elastic = {e->min_workers,
                                e->max_workers,
                                e->min_servers,
                                e->max_servers,
                                FinishesStepsWithoutLostWorkers(*config) && by_index,
                                ChangesWorkersLive(*config) && by_index,
                                DropsLostWorkersLive(*config) && by_index};
  }
  return ReportingOutOfMemory(RoleName(options->role), [&] { return RunNode(*options, *config); });
}

int RunLocal(const std::vector<std::string>& args) {
  if (WantsHelp(args)) {
    std::fputs(LocalOptionsHelp().c_str(), stdout);
    return 0;
  }
  auto options = ParseLocalOptions(args, ProcessEnv());
  if (!options.ok()) return UsageError(options.status());
  auto config = PrepareNodes(&options->cluster, options->config_path, options->config_overrides);
  if (!config.ok()) return UsageError(config.status());
  if (auto check = JobOf(*config, /*check_data=*/true); !check.ok())
    return UsageError(check.status());
  LocalJobOptions job;
  job.cluster = options->cluster;
  job.config = *config;
  job.make_job = [config = *config](int) {
    return std::move(JobOf(config, /*check_data=*/false).value());
  };
  Logger log = MakeLogger("local");
  WarnIfUnauthenticated(log, job.cluster);
  log->info("running a job of {} servers and {} workers on this machine", job.cluster.server_num,
            job.cluster.worker_num);
  return ReportingOutOfMemory("local", [&] {
    Status status = RunLocalJob(job);
    if (status.ok()) log->info("the job finished");
    return Finished(log, status);
  });
}

const std::vector<Subcommand>& Subcommands() {
  static const std::vector<Subcommand> kSubcommands = {
      {"local", "[flags]", "run a whole job (scheduler, servers, workers) on this machine",
       RunLocal},
      {"launch", "--hostfile F | --hosts H1,H2 [flags]",
       "start a job's nodes on several hosts over ssh and follow it to its end", RunLaunchCli},
      {"bench", "kv|allreduce|embedding|train|compress [flags]",
       "benchmarks, one JSON line per case (see docs/benchmarks.md)", RunBench},
      {"gen", "criteo --rows N --out DIR [flags]",
       "synthetic Criteo-format click data with a planted model", RunGen},
      {"export", "--checkpoint DIR --out FILE",
       "a checkpoint's weights and tables in a file numpy reads", RunExportCli},
      {"eval", "--config F --checkpoint DIR", "the test metric of a checkpoint, without training",
       RunEvalCli},
      {"check", "--config F",
       "build a config's model, check its data against it, show where each parameter lives",
       RunCheckCli},
      {"plot", "METRICS... --out FILE.svg", "loss, test metric and throughput of a run as SVG",
       RunPlotCli},
      {"scale", "--workers N --servers M",
       "ask a running elastic job (train.elastic) for a new shape", RunScaleCli},
  };
  return kSubcommands;
}

int Main(const std::vector<std::string>& args) {
  const EnvLookup env = ProcessEnv();
  if (args.empty() && !env("MS_ROLE")) {
    // Nothing to run: how to start, not a complaint about MS_SERVER_NUM.
    std::fputs(UsageText(Subcommands()).c_str(), stderr);
    return kExitUsage;
  }
  if (auto level = env("PSTRAIN_LOG_LEVEL")) {
    if (Status st = ApplyLogLevel(*level, "PSTRAIN_LOG_LEVEL"); !st.ok()) return UsageError(st);
  }
  if (std::string raised = RaiseOpenFileLimit(); !raised.empty())
    MakeLogger("pstrain")->debug("{}", raised);
  const std::string first = args.empty() ? "" : args[0];
  const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  if (first == "--help" || first == "-h" || first == "help") {
    std::fputs(UsageText(Subcommands()).c_str(), stdout);
    return 0;
  }
  if (first == "--version") {
    std::puts(VersionLine().c_str());
    return 0;
  }
  for (const Subcommand& s : Subcommands())
    if (first == s.name) return s.run(rest);
  if (!first.empty() && first[0] != '-')
    return UsageError(
        InvalidArgument(fmt::format("unknown command '{}' (see pstrain --help)", first)));
  if (WantsHelp(args)) {
    std::fputs(UsageText(Subcommands()).c_str(), stdout);
    return 0;
  }
  return RunRole(args);
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  // A write to a socket the peer has reset must fail that write (EPIPE), not
  // kill the process: a stranger could otherwise end any node.
  std::signal(SIGPIPE, SIG_IGN);
  std::set_terminate(pstrain::StopOnExhaustion);
  return pstrain::Main(std::vector<std::string>(argv + 1, argv + argc));
}
