#include "src/common/options.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>

namespace pstrain {
namespace {

// One setting: where it comes from (a flag, a variable) and how to store it.
struct Setting {
  const char* flag;  // without the leading "--"
  const char* env;   // nullptr: flag only
  bool required;
  const char* accepted;                           // for error messages
  std::function<bool(const std::string&)> store;  // false: malformed value
};

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

// `shape_required`: false where the cluster shape has defaults (`pstrain local`).
std::vector<Setting> ClusterSettings(ClusterOptions* c, bool shape_required) {
  return {
      IntSetting("servers", "MS_SERVER_NUM", shape_required, 0, 4096, "an integer from 0 to 4096",
                 &c->server_num),
      IntSetting("workers", "MS_WORKER_NUM", shape_required, 1, 4096, "an integer from 1 to 4096",
                 &c->worker_num),
      TextSetting("token", "MS_CLUSTER_TOKEN", false, "1 to 255 printable characters", &c->token),
      SecondsSetting("heartbeat-interval", "PSTRAIN_HEARTBEAT_INTERVAL", 0.01,
                     &c->heartbeat_interval_s),
      SecondsSetting("heartbeat-timeout", "PSTRAIN_HEARTBEAT_TIMEOUT", 0.01,
                     &c->heartbeat_timeout_s),
      SecondsSetting("connect-timeout", "PSTRAIN_CONNECT_TIMEOUT", 0.01, &c->connect_timeout_s),
      SecondsSetting("register-timeout", "PSTRAIN_REGISTER_TIMEOUT", 0.01, &c->register_timeout_s),
      {"test-fault", "PSTRAIN_TEST_FAULT", false, "close:N, drop:N or delay:N:MS (tests only)",
       [c](const std::string& s) {
         auto fault = ParseTestFault(s);
         if (fault) c->test_fault = *fault;
         return fault.has_value();
       }},
      TextSetting("tls-cert", "PSTRAIN_TLS_CERT", false, "a file path (PEM certificate)",
                  &c->tls.cert),
      TextSetting("tls-key", "PSTRAIN_TLS_KEY", false, "a file path (PEM private key)",
                  &c->tls.key),
      TextSetting("tls-ca", "PSTRAIN_TLS_CA", false, "a file path (PEM CA certificate)",
                  &c->tls.ca),
      SecondsSetting("handshake-timeout", "PSTRAIN_HANDSHAKE_TIMEOUT", 0.01,
                     &c->handshake_timeout_s),
      IntSetting("max-handshaking", "PSTRAIN_MAX_HANDSHAKING", false, 1, 1000000,
                 "an integer from 1 to 1000000", &c->max_handshaking),
      SecondsSetting("frame-stall-timeout", "PSTRAIN_FRAME_STALL_TIMEOUT", 0.01,
                     &c->frame_stall_timeout_s),
      {"max-queued-bytes", "PSTRAIN_MAX_QUEUED_BYTES", false,
       "a number of bytes from 1048576 (1 MiB) to 1125899906842624 (1 PiB)",
       [c](const std::string& s) {
         long v;
         if (!ParseInt(s, long{1} << 20, long{1} << 50, &v)) return false;
         c->max_queued_bytes = static_cast<uint64_t>(v);
         return true;
       }},
      TextSetting("log-dir", "PSTRAIN_LOG_DIR", false, "a directory path", &c->log_dir),
      PortSetting("http-port", "PSTRAIN_HTTP_PORT", false, 0, &c->http_port),
      {"ring-transport", "PSTRAIN_RING_TRANSPORT", false, "auto or tcp",
       [c](const std::string& s) {
         if (s != "auto" && s != "tcp") return false;
         c->ring_transport = s;
         return true;
       }},
  };
}

// "--name value" and "--name=value" into a map; anything else is an error.
StatusOr<std::map<std::string, std::string>> CollectFlags(const std::vector<std::string>& args,
                                                          const std::vector<Setting>& settings) {
  std::map<std::string, std::string> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || a.size() == 2)
      return InvalidArgument(fmt::format("unexpected argument '{}' (see pstrain --help)", a));
    std::string name = a.substr(2), value;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return InvalidArgument(fmt::format("--{} needs a value (see pstrain --help)", name));
    }
    bool known = false;
    for (const Setting& s : settings) known = known || name == s.flag;
    if (!known) return InvalidArgument(fmt::format("unknown flag --{} (see pstrain --help)", name));
    flags[name] = value;
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
    if (auto it = flags->find(s.flag); it != flags->end()) {
      value = it->second;
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
  std::vector<Setting> settings = ClusterSettings(&c, /*shape_required=*/true);
  const char* kRoles = "MS_SCHED, MS_PSERVER (or MS_SERVER) or MS_WORKER";
  settings.push_back({"role", "MS_ROLE", true, kRoles, [&o](const std::string& s) {
                        if (s == "MS_SCHED")
                          o.role = Role::kScheduler;
                        else if (s == "MS_PSERVER" || s == "MS_SERVER")
                          o.role = Role::kServer;
                        else if (s == "MS_WORKER")
                          o.role = Role::kWorker;
                        else
                          return false;
                        return true;
                      }});
  settings.push_back(
      TextSetting("sched-host", "MS_SCHED_HOST", true, "a host name or IP address", &c.sched_host));
  settings.push_back(PortSetting("sched-port", "MS_SCHED_PORT", true, 1, &c.sched_port));
  settings.push_back(TextSetting("node-id", "MS_NODE_ID", false,
                                 "1 to 255 printable characters without spaces", &o.node_id));
  settings.push_back(
      TextSetting("node-host", "MS_NODE_HOST", false, "a host name or IP address", &o.node_host));
  settings.push_back(PortSetting("node-port", "PSTRAIN_NODE_PORT", false, 0, &o.node_port));
  settings.push_back(TextSetting("bind-host", "PSTRAIN_BIND_HOST", false,
                                 "an IP address of this host (0.0.0.0: every interface)",
                                 &o.bind_host));
  settings.push_back(IntSetting("rank", "MS_NODE_RANK", false, 0, 4095,
                                "a whole number from 0 to 4095", &o.requested_rank));
  settings.push_back(TextSetting("config", "PSTRAIN_CONFIG", false, "a file path", &o.config_path));
  PSTRAIN_RETURN_IF_ERROR(ApplySettings(args, env, settings));
  PSTRAIN_RETURN_IF_ERROR(CheckHeartbeat(c));
  PSTRAIN_RETURN_IF_ERROR(CheckTls(c.tls));
  PSTRAIN_RETURN_IF_ERROR(CheckRequestedRank(o));
  if (o.node_id.empty()) o.node_id = MakeNodeId();
  return o;
}

StatusOr<LocalOptions> ParseLocalOptions(const std::vector<std::string>& args,
                                         const EnvLookup& env) {
  LocalOptions o;
  o.cluster.server_num = 2;
  o.cluster.worker_num = 2;
  std::vector<Setting> settings = ClusterSettings(&o.cluster, /*shape_required=*/false);
  settings.push_back(TextSetting("config", "PSTRAIN_CONFIG", false, "a file path", &o.config_path));
  PSTRAIN_RETURN_IF_ERROR(ApplySettings(args, env, settings));
  PSTRAIN_RETURN_IF_ERROR(CheckHeartbeat(o.cluster));
  PSTRAIN_RETURN_IF_ERROR(CheckTls(o.cluster.tls));
  return o;
}

std::string MakeNodeId() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  uint64_t a = gen(), b = gen();
  return fmt::format("{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xfff,
                     (b >> 48 & 0x3fff) | 0x8000, b & 0xffffffffffffULL);
}

}  // namespace pstrain
