#include "src/common/config/options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>

#include "src/common/logging.h"

namespace pstrain {
namespace {

// One setting: where it comes from (a flag, a variable) and how to store it.
// The same table declares the CLI11 flags (parsing and --help) and reads the
// variables, so the help cannot drift from what is parsed.
struct Setting {
  const char* flag;  // without the leading "--"
  const char* env;   // nullptr: flag only
  bool required;
  const char* accepted;                           // for error messages and --help
  std::function<bool(const std::string&)> store;  // false: malformed value
  const char* what = "";                          // its meaning, for --help
  // kValue: the last given counts; kRepeated: each is stored, in order;
  // kSwitch: a flag without a value, stored as "true". Both of the latter
  // are flags only.
  enum class Kind { kValue, kRepeated, kSwitch } kind = Setting::Kind::kValue;
};

// The same setting with its meaning for --help.
Setting Described(Setting s, const char* what) {
  s.what = what;
  return s;
}

bool ParseInt(const std::string& s, long lo, long hi, long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool ParseSeconds(const std::string& s, double lo, double hi, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

Setting IntSetting(const char* flag, const char* env, bool required, long lo, long hi,
                   const char* accepted, int* target) {
  return {flag, env, required, accepted, [=](const std::string& s) {
            long v;
            if (!ParseInt(s, lo, hi, &v)) return false;
            *target = static_cast<int>(v);
            return true;
          }};
}

Setting PortSetting(const char* flag, const char* env, bool required, long lo, uint16_t* target) {
  const char* accepted =
      lo == 0 ? "a port number from 0 to 65535" : "a port number from 1 to 65535";
  return {flag, env, required, accepted, [=](const std::string& s) {
            long v;
            if (!ParseInt(s, lo, 65535, &v)) return false;
            *target = static_cast<uint16_t>(v);
            return true;
          }};
}

Setting SecondsSetting(const char* flag, const char* env, double lo, double* target) {
  return {flag, env, false, "a number of seconds from 0.01 to 86400",
          [=](const std::string& s) { return ParseSeconds(s, lo, 86400.0, target); }};
}

Setting TextSetting(const char* flag, const char* env, bool required, const char* accepted,
                    std::string* target) {
  return {flag, env, required, accepted, [=](const std::string& s) {
            if (s.empty() || s.size() > 255) return false;
            for (char c : s)
              if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
            *target = s;
            return true;
          }};
}

// --config, and the changes the command line makes to it
// (src/common/config/overrides.h).
std::vector<Setting> ConfigSettings(std::string* path, ConfigOverrides* overrides) {
  Setting set{"set",
              nullptr,
              false,
              "KEY=VALUE",
              [overrides](const std::string& s) {
                overrides->sets.push_back(s);
                return true;
              },
              "change a key of the config, repeatable (train.optimizer.lr=0.1; the value in "
              "YAML)"};
  set.kind = Setting::Kind::kRepeated;
  Setting resume{"resume",
                 nullptr,
                 false,
                 "no value",
                 [overrides](const std::string&) {
                   overrides->resume = true;
                   return true;
                 },
                 "resume from the newest checkpoint in train.checkpoint.dir"};
  resume.kind = Setting::Kind::kSwitch;
  return {Described(TextSetting("config", "PSTRAIN_CONFIG", false, "a file path", path),
                    "the job's YAML config"),
          set, resume};
}

// `shape_required`: false where the cluster shape has defaults (`pstrain local`).
std::vector<Setting> ClusterSettings(ClusterOptions* c, bool shape_required) {
  return {
      Described(IntSetting("servers", "MS_SERVER_NUM", shape_required, 0, 65536,
                           "an integer from 0 to 65536", &c->server_num),
                "number of servers in the job"),
      Described(IntSetting("workers", "MS_WORKER_NUM", shape_required, 1, 65536,
                           "an integer from 1 to 65536", &c->worker_num),
                "number of workers in the job"),
      Described(
          TextSetting("token", "MS_CLUSTER_TOKEN", false, "1 to 255 printable characters",
                      &c->token),
          "shared secret, proved on every connection by HMAC challenge and response (never sent)"),
      Described(SecondsSetting("heartbeat-interval", "PSTRAIN_HEARTBEAT_INTERVAL", 0.01,
                               &c->heartbeat_interval_s),
                "seconds between heartbeats (default 1)"),
      Described(SecondsSetting("heartbeat-timeout", "PSTRAIN_HEARTBEAT_TIMEOUT", 0.01,
                               &c->heartbeat_timeout_s),
                "a node silent this long ends the job (default 30)"),
      Described(
          SecondsSetting("connect-timeout", "PSTRAIN_CONNECT_TIMEOUT", 0.01, &c->connect_timeout_s),
          "how long a node keeps trying to reach the scheduler (default 60)"),
      Described(SecondsSetting("register-timeout", "PSTRAIN_REGISTER_TIMEOUT", 0.01,
                               &c->register_timeout_s),
                "how long the scheduler waits for every node to register (default 300)"),
      Described(
          {"test-fault", "PSTRAIN_TEST_FAULT", false, "close:N, drop:N or delay:N:MS (tests only)",
           [c](const std::string& s) {
             auto fault = ParseTestFault(s);
             if (fault) c->test_fault = *fault;
             return fault.has_value();
           }},
          "a fault injected into this process's pushes"),
      Described(TextSetting("test-sample-log", "PSTRAIN_TEST_SAMPLE_LOG", false, "a file path",
                            &c->test_sample_log),
                "a worker appends \"epoch sample\" for every sample it trains (tests only)"),
      Described(TextSetting("tls-cert", "PSTRAIN_TLS_CERT", false, "a file path (PEM certificate)",
                            &c->tls.cert),
                "this node's certificate; with the key and the CA, every connection is mutual "
                "TLS 1.3 (all three or none)"),
      Described(TextSetting("tls-key", "PSTRAIN_TLS_KEY", false, "a file path (PEM private key)",
                            &c->tls.key),
                "this node's private key"),
      Described(TextSetting("tls-ca", "PSTRAIN_TLS_CA", false, "a file path (PEM CA certificate)",
                            &c->tls.ca),
                "the CA every peer's certificate must be signed by"),
      Described(SecondsSetting("handshake-timeout", "PSTRAIN_HANDSHAKE_TIMEOUT", 0.01,
                               &c->handshake_timeout_s),
                "a connection not authenticated this long after it opened is closed (default 10)"),
      Described(IntSetting("max-handshaking", "PSTRAIN_MAX_HANDSHAKING", false, 1, 1000000,
                           "an integer from 1 to 1000000", &c->max_handshaking),
                "accepted connections still in their handshake at once (default 64)"),
      Described(SecondsSetting("frame-stall-timeout", "PSTRAIN_FRAME_STALL_TIMEOUT", 0.01,
                               &c->frame_stall_timeout_s),
                "a frame begun that receives no byte this long is dropped with its connection "
                "(default 60)"),
      Described({"max-queued-bytes", "PSTRAIN_MAX_QUEUED_BYTES", false,
                 "a number of bytes from 1048576 (1 MiB) to 1125899906842624 (1 PiB)",
                 [c](const std::string& s) {
                   long v;
                   if (!ParseInt(s, long{1} << 20, long{1} << 50, &v)) return false;
                   c->max_queued_bytes = static_cast<uint64_t>(v);
                   return true;
                 }},
                "bytes queued unsent to one peer before its connection is closed (default 4 GiB)"),
      Described(TextSetting("log-dir", "PSTRAIN_LOG_DIR", false, "a directory path", &c->log_dir),
                "where this node writes its metrics-<role>-<rank>.jsonl (default .)"),
      Described(PortSetting("http-port", "PSTRAIN_HTTP_PORT", false, 0, &c->http_port),
                "the scheduler's HTTP view of the job (/status, /metrics); 0: off (default)"),
      Described({"log-level", "PSTRAIN_LOG_LEVEL", false, "trace, debug, info, warn, error or off",
                 [c](const std::string& s) {
                   if (!ParseLogLevel(s)) return false;
                   c->log_level = s;
                   return true;
                 }},
                "the least severe log lines shown (default info)"),
      Described({"ring-transport", "PSTRAIN_RING_TRANSPORT", false, "auto or tcp",
                 [c](const std::string& s) {
                   if (s != "auto" && s != "tcp") return false;
                   c->ring_transport = s;
                   return true;
                 }},
                "the workers' all-reduce ring: auto (shared memory on one host, else TCP) or tcp"),
  };
}

// The settings of a role process (`pstrain [flags]`), storing into `o`.
std::vector<Setting> NodeSettings(NodeOptions* o) {
  ClusterOptions& c = o->cluster;
  std::vector<Setting> settings = ClusterSettings(&c, /*shape_required=*/true);
  const char* kRoles = "MS_SCHED, MS_PSERVER (or MS_SERVER) or MS_WORKER";
  settings.insert(settings.begin(), Described({"role", "MS_ROLE", true, kRoles,
                                               [o](const std::string& s) {
                                                 if (s == "MS_SCHED")
                                                   o->role = Role::kScheduler;
                                                 else if (s == "MS_PSERVER" || s == "MS_SERVER")
                                                   o->role = Role::kServer;
                                                 else if (s == "MS_WORKER")
                                                   o->role = Role::kWorker;
                                                 else
                                                   return false;
                                                 return true;
                                               }},
                                              "this node's role"));
  settings.push_back(Described(
      TextSetting("sched-host", "MS_SCHED_HOST", true, "a host name or IP address", &c.sched_host),
      "address the scheduler listens on (and nodes dial)"));
  settings.push_back(Described(PortSetting("sched-port", "MS_SCHED_PORT", true, 1, &c.sched_port),
                               "port of the scheduler"));
  settings.push_back(
      Described(TextSetting("node-id", "MS_NODE_ID", false,
                            "1 to 255 printable characters without spaces", &o->node_id),
                "stable identity: a node that comes back with the same id gets its old rank "
                "(default: a random id)"));
  settings.push_back(Described(
      TextSetting("node-host", "MS_NODE_HOST", false, "a host name or IP address", &o->node_host),
      "address this node advertises to its peers (default: the address "
      "it reaches the scheduler from)"));
  settings.push_back(Described(
      {"network-mask", "PSTRAIN_NETWORK_MASK", false,
       "a network in CIDR form, its bits past the prefix zero (10.1.0.0/16, fd00::/8)",
       [o](const std::string& s) {
         o->network_mask = ParseNetworkMask(s);
         return o->network_mask.has_value();
       }},
      "a server or worker without --node-host advertises and listens on its address in this "
      "network"));
  settings.push_back(
      Described(PortSetting("node-port", "PSTRAIN_NODE_PORT", false, 0, &o->node_port),
                "port this node listens on (default: any)"));
  settings.push_back(
      Described(TextSetting("bind-host", "PSTRAIN_BIND_HOST", false,
                            "an IP address of this host (0.0.0.0: every interface)", &o->bind_host),
                "the address the node port listens on (default: the advertised one)"));
  settings.push_back(Described(IntSetting("rank", "MS_NODE_RANK", false, 0, 4095,
                                          "a whole number from 0 to 4095", &o->requested_rank),
                               "the rank to ask for, below the role's count (default: the "
                               "scheduler picks)"));
  for (Setting& s : ConfigSettings(&o->config_path, &o->config_overrides))
    settings.push_back(std::move(s));
  return settings;
}

// The settings of `pstrain local`: the shape has defaults, there is no role.
std::vector<Setting> LocalSettings(LocalOptions* o) {
  std::vector<Setting> settings = ClusterSettings(&o->cluster, /*shape_required=*/false);
  for (Setting& s : ConfigSettings(&o->config_path, &o->config_overrides))
    settings.push_back(std::move(s));
  return settings;
}

// Declares every setting as a flag of `app`. Parsing collects the raw text
// into `flags` (the settings validate it later, flag before variable). With
// `show_env`, the help names each flag's variable; the parsing app does not
// set CLI11's envname, which would read the real environment behind the
// EnvLookup's back.
using CollectedFlags = std::map<std::string, std::vector<std::string>>;

void DeclareSettings(CLI::App* app, const std::vector<Setting>& settings, bool show_env,
                     CollectedFlags* flags) {
  for (const Setting& s : settings) {
    const std::string flag = s.flag;
    const std::string help = fmt::format("{}: {}", s.what, s.accepted);
    if (s.kind == Setting::Kind::kSwitch) {
      app->add_flag_function(
             "--" + flag, [flags, flag](std::int64_t) { (*flags)[flag] = {"true"}; }, s.what)
          ->disable_flag_override();  // --resume=false is refused, not taken as --resume
      continue;
    }
    if (s.kind == Setting::Kind::kRepeated) {
      app->add_option_function<std::vector<std::string>>(
             "--" + flag,
             [flags, flag](const std::vector<std::string>& values) {
               auto& all = (*flags)[flag];
               all.insert(all.end(), values.begin(), values.end());
             },
             help)
          ->expected(1)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->type_name(s.accepted);
      continue;
    }
    CLI::Option* option = app->add_option_function<std::string>(
        "--" + flag, [flags, flag](const std::string& value) { (*flags)[flag] = {value}; }, help);
    // The last of repeated flags wins, as a later assignment would.
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->type_name("VALUE");
    if (show_env && s.env != nullptr) option->envname(s.env);
  }
}

// "--name value" and "--name=value" into a map, through CLI11; anything
// else is an error naming the first stray argument.
StatusOr<CollectedFlags> CollectFlags(const std::vector<std::string>& args,
                                      const std::vector<Setting>& settings) {
  CollectedFlags flags;
  CLI::App app("pstrain", "pstrain");
  app.set_help_flag();  // main answers --help before parsing
  app.allow_extras();   // strays are reported below, in pstrain's words
  DeclareSettings(&app, settings, /*show_env=*/false, &flags);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(fmt::format("{} (see pstrain --help)", e.what()));
  }
  for (const std::string& extra : app.remaining()) {
    if (extra.rfind("-", 0) == 0 && extra.size() > 1) {
      const std::string name = extra.substr(0, extra.find('='));
      return InvalidArgument(fmt::format("unknown flag {} (see pstrain --help)", name));
    }
    return InvalidArgument(fmt::format("unexpected argument '{}' (see pstrain --help)", extra));
  }
  return flags;
}

Status ApplySettings(const std::vector<std::string>& args, const EnvLookup& env,
                     const std::vector<Setting>& settings) {
  auto flags = CollectFlags(args, settings);
  if (!flags.ok()) return flags.status();
  for (const Setting& s : settings) {
    std::optional<std::string> value;
    std::string source;
    const auto it = flags->find(s.flag);
    if (it != flags->end() && s.kind == Setting::Kind::kRepeated) {
      for (const std::string& each : it->second) s.store(each);
      continue;
    }
    if (it != flags->end()) {
      value = it->second.back();
      source = fmt::format("--{}", s.flag);
    } else if (s.env != nullptr) {
      value = env(s.env);
      source = s.env;
    }
    if (!value) {
      if (!s.required) continue;
      std::string name =
          s.env ? fmt::format("{} (or --{})", s.env, s.flag) : fmt::format("--{}", s.flag);
      return InvalidArgument(fmt::format("{} is not set: expected {}", name, s.accepted));
    }
    if (!s.store(*value))
      return InvalidArgument(fmt::format("{} is '{}': expected {}", source, *value, s.accepted));
  }
  return Status::OK();
}

// The help of the flags `settings` declares, as CLI11 formats it.
std::string SettingsHelp(const std::vector<Setting>& settings, const std::string& name,
                         const std::string& description) {
  CollectedFlags unused;
  CLI::App app(description, name);
  DeclareSettings(&app, settings, /*show_env=*/true, &unused);
  return app.help();
}

Status CheckHeartbeat(const ClusterOptions& c) {
  if (c.heartbeat_timeout_s < 2 * c.heartbeat_interval_s)
    return InvalidArgument(fmt::format(
        "PSTRAIN_HEARTBEAT_TIMEOUT ({} s) must be at least twice PSTRAIN_HEARTBEAT_INTERVAL ({} s)",
        c.heartbeat_timeout_s, c.heartbeat_interval_s));
  return Status::OK();
}

// The TLS files go together: a node with some of them would talk plaintext
// to peers that expect TLS, or be unable to prove who it is.
Status CheckTls(const TlsFiles& tls) {
  const int set = !tls.cert.empty() + !tls.key.empty() + !tls.ca.empty();
  if (set == 0 || set == 3) return Status::OK();
  std::string missing;
  for (auto [value, name] :
       {std::pair{&tls.cert, "PSTRAIN_TLS_CERT"}, std::pair{&tls.key, "PSTRAIN_TLS_KEY"},
        std::pair{&tls.ca, "PSTRAIN_TLS_CA"}})
    if (value->empty()) missing += fmt::format("{}{}", missing.empty() ? "" : " and ", name);
  return InvalidArgument(
      fmt::format("PSTRAIN_TLS_CERT, PSTRAIN_TLS_KEY and PSTRAIN_TLS_CA (or --tls-cert, --tls-key, "
                  "--tls-ca) go together: {} not set",
                  missing + (set == 2 ? " is" : " are")));
}

// MS_NODE_RANK's range depends on the role and the job shape, which are only
// known once every setting is read.
Status CheckRequestedRank(const NodeOptions& o) {
  if (o.requested_rank < 0) return Status::OK();
  if (o.role == Role::kScheduler)
    return InvalidArgument(
        fmt::format("MS_NODE_RANK (or --rank) is '{}': the scheduler takes no rank; leave it unset",
                    o.requested_rank));
  const bool server = o.role == Role::kServer;
  const int count = server ? o.cluster.server_num : o.cluster.worker_num;
  if (o.requested_rank < count) return Status::OK();
  return InvalidArgument(
      fmt::format("MS_NODE_RANK (or --rank) is '{}': expected a {} rank from 0 to {} ({} is {})",
                  o.requested_rank, RoleName(o.role), count - 1,
                  server ? "MS_SERVER_NUM" : "MS_WORKER_NUM", count));
}

}  // namespace

std::optional<TestFault> ParseTestFault(const std::string& text) {
  TestFault f;
  size_t colon = text.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::string kind = text.substr(0, colon), rest = text.substr(colon + 1);
  std::string count = rest, delay;
  if (kind == "close") {
    f.kind = TestFault::Kind::kClose;
  } else if (kind == "drop") {
    f.kind = TestFault::Kind::kDrop;
  } else if (kind == "delay") {
    f.kind = TestFault::Kind::kDelay;
    size_t second = rest.find(':');
    if (second == std::string::npos) return std::nullopt;
    count = rest.substr(0, second);
    delay = rest.substr(second + 1);
  } else {
    return std::nullopt;
  }
  long n = 0, ms = 0;
  if (!ParseInt(count, 1, 1L << 40, &n)) return std::nullopt;
  if (f.kind == TestFault::Kind::kDelay && !ParseInt(delay, 1, 600000, &ms)) return std::nullopt;
  f.after = n;
  f.delay_ms = static_cast<uint64_t>(ms);
  return f;
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kScheduler:
      return "scheduler";
    case Role::kServer:
      return "server";
    case Role::kWorker:
      return "worker";
  }
  return "?";
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

StatusOr<NodeOptions> ParseNodeOptions(const std::vector<std::string>& args, const EnvLookup& env) {
  NodeOptions o;
  ClusterOptions& c = o.cluster;
  PSTRAIN_RETURN_IF_ERROR(ApplySettings(args, env, NodeSettings(&o)));
  PSTRAIN_RETURN_IF_ERROR(CheckOverrides(o.config_overrides));
  PSTRAIN_RETURN_IF_ERROR(CheckHeartbeat(c));
  PSTRAIN_RETURN_IF_ERROR(CheckTls(c.tls));
  PSTRAIN_RETURN_IF_ERROR(CheckRequestedRank(o));
  if (o.node_id.empty()) o.node_id = MakeNodeId();
  return o;
}

StatusOr<std::string> ApplyNetworkMask(NodeOptions* o,
                                       const std::vector<InterfaceAddress>& addresses) {
  if (!o->network_mask || o->role == Role::kScheduler) return std::string();
  const std::string& mask = o->network_mask->text;
  if (!o->node_host.empty())
    return fmt::format("advertising MS_NODE_HOST {}, which wins over the network mask {}",
                       o->node_host, mask);
  auto chosen = AddressIn(*o->network_mask, addresses);
  if (!chosen.ok()) return chosen.status().WithContext("PSTRAIN_NETWORK_MASK (--network-mask)");
  o->node_host = chosen->ip;
  return fmt::format("advertising {} ({}), in the network mask {}", chosen->ip, chosen->interface,
                     mask);
}

StatusOr<LocalOptions> ParseLocalOptions(const std::vector<std::string>& args,
                                         const EnvLookup& env) {
  LocalOptions o;
  o.cluster.server_num = 2;
  o.cluster.worker_num = 2;
  PSTRAIN_RETURN_IF_ERROR(ApplySettings(args, env, LocalSettings(&o)));
  PSTRAIN_RETURN_IF_ERROR(CheckOverrides(o.config_overrides));
  PSTRAIN_RETURN_IF_ERROR(CheckHeartbeat(o.cluster));
  PSTRAIN_RETURN_IF_ERROR(CheckTls(o.cluster.tls));
  return o;
}

// `pstrain scale`: the scheduler's address and the job's credentials from
// the usual variables (or flags), the shape asked for from flags only, so
// that a shell holding a node's MS_WORKER_NUM does not ask for it by mistake.
std::vector<Setting> ScaleSettings(ScaleOptions* o) {
  std::vector<Setting> settings;
  for (Setting& s : ClusterSettings(&o->cluster, /*shape_required=*/false)) {
    const std::string flag = s.flag;
    if (flag == "token" || flag.rfind("tls-", 0) == 0 || flag == "handshake-timeout" ||
        flag == "connect-timeout")
      settings.push_back(std::move(s));
  }
  ClusterOptions& c = o->cluster;
  settings.push_back(Described(
      TextSetting("sched-host", "MS_SCHED_HOST", true, "a host name or IP address", &c.sched_host),
      "address of the job's scheduler"));
  settings.push_back(Described(PortSetting("sched-port", "MS_SCHED_PORT", true, 1, &c.sched_port),
                               "port of the scheduler"));
  settings.push_back(Described(
      IntSetting("workers", nullptr, false, 1, 65536, "an integer from 1 to 65536", &o->workers),
      "the number of workers the job should have"));
  settings.push_back(Described(
      IntSetting("servers", nullptr, false, 0, 65536, "an integer from 0 to 65536", &o->servers),
      "the number of servers the job should have"));
  return settings;
}

StatusOr<ScaleOptions> ParseScaleOptions(const std::vector<std::string>& args,
                                         const EnvLookup& env) {
  ScaleOptions o;
  PSTRAIN_RETURN_IF_ERROR(ApplySettings(args, env, ScaleSettings(&o)));
  PSTRAIN_RETURN_IF_ERROR(CheckTls(o.cluster.tls));
  if (o.workers < 0 && o.servers < 0)
    return InvalidArgument("say the shape to scale to: --workers N, --servers M or both");
  return o;
}

std::string ScaleOptionsHelp() {
  ScaleOptions o;
  return SettingsHelp(ScaleSettings(&o), "pstrain scale",
                      "Asks the scheduler of a running elastic job (train.elastic) for a new "
                      "shape; nodes beyond it leave at a step every worker reaches, and new nodes "
                      "join as they register.");
}

std::string NodeOptionsHelp() {
  NodeOptions o;
  return SettingsHelp(NodeSettings(&o), "pstrain",
                      "Runs one node of a job; its role comes from MS_ROLE (or --role). A flag "
                      "overrides the variable of the same meaning.");
}

std::string LocalOptionsHelp() {
  LocalOptions o;
  return SettingsHelp(LocalSettings(&o), "pstrain local",
                      "Runs a whole job (scheduler, servers, workers) on this machine as threads "
                      "of one process; --servers and --workers default to 2.");
}

int ParseCommandLine(CLI::App* app, const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
  try {
    app->parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app->help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    // The innermost command chosen, so the hint points at its own help.
    std::string command = app->get_name();
    for (const CLI::App* sub = app; !sub->get_subcommands().empty();) {
      sub = sub->get_subcommands().front();
      command += " " + sub->get_name();
    }
    std::fprintf(stderr, "%s: %s (see %s --help)\n", command.c_str(), e.what(), command.c_str());
    return 2;
  }
  return -1;
}

std::string MakeNodeId() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  uint64_t a = gen(), b = gen();
  return fmt::format("{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xfff,
                     (b >> 48 & 0x3fff) | 0x8000, b & 0xffffffffffffULL);
}

}  // namespace pstrain
