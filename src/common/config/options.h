// Node options: what a pstrain process is told by its environment and flags.
//
// The MindSpore variables (MS_ROLE, MS_SERVER_NUM, MS_WORKER_NUM,
// MS_SCHED_HOST, MS_SCHED_PORT, MS_NODE_ID, MS_NODE_HOST, MS_CLUSTER_TOKEN),
// MS_NODE_RANK
// and pstrain's own PSTRAIN_* tuning variables are read here and nowhere else;
// a command-line flag overrides the variable of the same meaning. Every value
// is validated once; an error names the variable (or flag) and what it
// accepts, so main() can print it on one line and exit with status 2.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/common/config/overrides.h"
#include "src/common/network_mask.h"
#include "src/common/status.h"

namespace CLI {
class App;
}

namespace pstrain {

enum class Role { kScheduler, kServer, kWorker };

// "scheduler", "server", "worker": the words the scheduler log uses.
const char* RoleName(Role role);

// A fault a test injects into this process's pushes (PSTRAIN_TEST_FAULT;
// never set in production): on its `after`-th push or sparse push frame (on
// a server: its `after`-th change to its backups),
// close the connection instead (kClose), never send the frame (kDrop), or
// send it `delay_ms` late (kDelay). Fires in a node's first run only.
struct TestFault {
  enum class Kind { kNone, kClose, kDrop, kDelay };
  Kind kind = Kind::kNone;
  int64_t after = 0;
  uint64_t delay_ms = 0;
};
// "close:N", "drop:N" or "delay:N:MS"; nullopt when malformed.
std::optional<TestFault> ParseTestFault(const std::string& text);

// PSTRAIN_TLS_CERT, PSTRAIN_TLS_KEY, PSTRAIN_TLS_CA: the files of this
// node's TLS identity (PEM). All three or none; none: plaintext.
struct TlsFiles {
  std::string cert, key, ca;
  bool enabled() const { return !cert.empty(); }
};

// train.elastic as the scheduler protocol carries it (roles/scheduler/elastic.cc).
// max_workers 0: the job's shape is fixed. min_servers -1: its server count is.
struct ElasticBounds {
  int min_workers = 0, max_workers = 0;
  int min_servers = -1, max_servers = -1;
  // A lost worker costs no step: the others finish the step under way
  // without it (roles/scheduler/lost_worker.cc). Set for sync jobs with
  // live_workers; the others go back to their newest checkpoint.
  bool finish_lost = false;
  // Workers join and leave live (roles/scheduler/live_workers.cc). Set for
  // sync, async and ssp jobs on the CPU with no compression, whose training
  // set is not split by file; the others change workers through the
  // checkpoint of the change's step.
  bool live_workers = false;
  // A lost worker is dropped live at the furthest step the others reach,
  // and the batches it never pushed are trained by them first (roles/
  // scheduler/lost_worker.cc). Set for async and ssp jobs with
  // live_workers.
  bool drop_lost = false;
  // The job goes on live without a lost worker, one way or the other.
  bool GoesOnWithoutLost() const { return finish_lost || drop_lost; }
  bool enabled() const { return max_workers > 0; }
  bool servers_elastic() const { return enabled() && max_servers >= 0; }
  // Whether `role`'s count may change, and its bounds when it may.
  bool Elastic(Role role) const { return role == Role::kServer ? servers_elastic() : enabled(); }
  int Min(Role role) const { return role == Role::kServer ? min_servers : min_workers; }
  int Max(Role role) const { return role == Role::kServer ? max_servers : max_workers; }
  // Whether a job of this shape lies within the bounds (servers: when
  // their count may change at all).
  bool Allows(int servers, int workers) const {
    return workers >= min_workers && workers <= max_workers &&
           (!servers_elastic() || (servers >= min_servers && servers <= max_servers));
  }
  bool operator==(const ElasticBounds& o) const {
    return min_workers == o.min_workers && max_workers == o.max_workers &&
           min_servers == o.min_servers && max_servers == o.max_servers &&
           finish_lost == o.finish_lost && live_workers == o.live_workers &&
           drop_lost == o.drop_lost;
  }
};

struct ClusterOptions {
  int server_num = 0;
  int worker_num = 0;
  std::string sched_host = "127.0.0.1";
  uint16_t sched_port = 0;  // 0 only in-process (tests, `pstrain local`)
  std::string token;        // MS_CLUSTER_TOKEN; empty = no check
  double heartbeat_interval_s = 1.0;
  double heartbeat_timeout_s = 30.0;  // a node silent this long ends the job
  double connect_timeout_s = 60.0;    // how long a node keeps trying the scheduler
  // How long the scheduler waits for every node to register before it ends
  // the job naming the missing ones (PSTRAIN_REGISTER_TIMEOUT).
  double register_timeout_s = 300.0;
  // Set from the config (train.recovery), not the environment: how long the
  // job waits for a lost node's replacement; 0 ends the job at once.
  double recovery_wait_s = 0;
  // train.recovery.max_failed_link_rollbacks, read by the scheduler from
  // its own config (the default without one).
  int max_failed_link_rollbacks = 3;
  // train.elastic, from the config.
  ElasticBounds elastic;
  // train.replication.replicas, from the config: servers then talk to each
  // other (roles/node/peers.h).
  int replicas = 0;
  // Set from the config too: its JobConfigText (src/common/config/identity.h)
  // and its file, so that every node of a job runs the same config. The
  // scheduler, when started with a config, is the reference; else the
  // first node to register.
  std::string job_config;
  std::string job_config_source;
  // Workers' ring: "auto" uses shared memory when every worker shares one
  // host, TCP otherwise; "tcp" always TCP (PSTRAIN_RING_TRANSPORT).
  std::string ring_transport = "auto";
  TestFault test_fault;  // PSTRAIN_TEST_FAULT: tests only
  // PSTRAIN_TEST_SAMPLE_LOG: a worker appends a line "epoch sample" for
  // every sample it trains (tests count what each epoch used). Tests only.
  std::string test_sample_log;
  TlsFiles tls;  // every connection is TLS 1.3 when set
  // Limits before resources (comm/transport/security.h; docs/security.md, "Limits").
  double handshake_timeout_s = 10;    // PSTRAIN_HANDSHAKE_TIMEOUT
  int max_handshaking = 64;           // PSTRAIN_MAX_HANDSHAKING, per node
  double frame_stall_timeout_s = 60;  // PSTRAIN_FRAME_STALL_TIMEOUT
  // PSTRAIN_MAX_QUEUED_BYTES, per peer: twice the largest frame payload
  // (2 GiB, comm/transport/frame.h), so the biggest legitimate reply fits with room
  // for the next.
  uint64_t max_queued_bytes = uint64_t{4} << 30;
  // Where this node writes its metrics-<role>-<rank>.jsonl (PSTRAIN_LOG_DIR,
  // --log-dir; the launch scripts put the node logs there too).
  std::string log_dir = ".";
  // The scheduler's HTTP view of the job (/status, /metrics) listens here,
  // on the scheduler's host (PSTRAIN_HTTP_PORT, --http-port); 0: off.
  uint16_t http_port = 0;
  // The least severe lines every logger shows (PSTRAIN_LOG_LEVEL,
  // --log-level; validated by ParseLogLevel, src/common/logging.h).
  std::string log_level = "info";
};

struct NodeOptions {
  Role role = Role::kWorker;
  ClusterOptions cluster;
  std::string node_id;     // empty: a fresh random id is made at start-up
  std::string node_host;   // empty: the address used to reach the scheduler
  uint16_t node_port = 0;  // 0: any free port
  // The address the node port listens on (PSTRAIN_BIND_HOST); empty: the
  // advertised one (MS_NODE_HOST, else the route's to the scheduler).
  std::string bind_host;
  // The network whose address a server or worker advertises and listens on
  // when MS_NODE_HOST is unset (PSTRAIN_NETWORK_MASK); see ApplyNetworkMask.
  std::optional<NetworkMask> network_mask;
  // The rank this node asks the scheduler for (MS_NODE_RANK, --rank), below
  // the role's count; -1: the scheduler picks. Launchers set it from their
  // own index of the process, so log files and labels follow ranks.
  int requested_rank = -1;
  std::string config_path;
  ConfigOverrides config_overrides;  // --set, --resume
};

// Looks up an environment variable; nullopt when unset. Tests pass a map.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnv();

// Parses a role process's options (`pstrain [flags]`): role and cluster shape
// are required. `args` excludes the program name.
StatusOr<NodeOptions> ParseNodeOptions(const std::vector<std::string>& args, const EnvLookup& env);

// With a network mask, a server or worker that has no MS_NODE_HOST takes
// the first of `addresses` (this host's: LocalInterfaceAddresses) in that
// network as its node_host, so it advertises and listens there. MS_NODE_HOST
// wins where both are set: an address names one interface, a mask narrows a
// choice. The scheduler is left alone (it listens on MS_SCHED_HOST). Returns
// the line to log about the choice ("" when there is no mask); no address
// in the mask: FailedPrecondition naming the mask and every address.
StatusOr<std::string> ApplyNetworkMask(NodeOptions* options,
                                       const std::vector<InterfaceAddress>& addresses);

// Options of `pstrain local`: the cluster shape from --servers/--workers (or
// the MS_* variables), no role and no scheduler address.
struct LocalOptions {
  ClusterOptions cluster;
  std::string config_path;
  ConfigOverrides config_overrides;  // --set, --resume
};
StatusOr<LocalOptions> ParseLocalOptions(const std::vector<std::string>& args,
                                         const EnvLookup& env);

// Options of `pstrain scale --workers N --servers M`: the shape an elastic
// job should have (-1: unchanged) and how to reach its scheduler.
struct ScaleOptions {
  ClusterOptions cluster;
  int workers = -1;
  int servers = -1;
};
StatusOr<ScaleOptions> ParseScaleOptions(const std::vector<std::string>& args,
                                         const EnvLookup& env);
std::string ScaleOptionsHelp();

// `pstrain --help` and `pstrain local --help`: every flag, what it
// accepts and its variable, from the tables the parsers above use.
std::string NodeOptionsHelp();
std::string LocalOptionsHelp();

// Parses `args` (no program name) into `app`'s options (CLI11). Returns -1
// when the caller goes on; else the exit status: 0 after printing the help
// asked for (--help, -h, on `app` or the subcommand chosen), 2 after one
// line on stderr naming what was wrong.
int ParseCommandLine(CLI::App* app, const std::vector<std::string>& args);

// A random node id in the UUID text form, as MindSpore's are.
std::string MakeNodeId();

}  // namespace pstrain
