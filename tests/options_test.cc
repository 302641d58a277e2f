// Environment and flag parsing: what a user sees when a variable is missing
// or malformed, and that flags override the environment.
#include "src/common/config/options.h"

#include <doctest/doctest.h>

#include <map>

namespace pstrain {
namespace {

using Env = std::map<std::string, std::string>;

EnvLookup Lookup(Env env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

Env Valid() {
  return {{"MS_ROLE", "MS_WORKER"},
          {"MS_SERVER_NUM", "2"},
          {"MS_WORKER_NUM", "3"},
          {"MS_SCHED_HOST", "127.0.0.1"},
          {"MS_SCHED_PORT", "8081"}};
}

std::string ErrorOf(Env env, std::vector<std::string> args = {}) {
  auto o = ParseNodeOptions(args, Lookup(env));
  REQUIRE_FALSE(o.ok());
  CHECK(o.status().code() == StatusCode::kInvalidArgument);
  return o.status().message();
}

TEST_CASE("a complete environment parses") {
  auto o = ParseNodeOptions({}, Lookup(Valid()));
  REQUIRE(o.ok());
  CHECK(o->role == Role::kWorker);
  CHECK(o->cluster.server_num == 2);
  CHECK(o->cluster.worker_num == 3);
  CHECK(o->cluster.sched_host == "127.0.0.1");
  CHECK(o->cluster.sched_port == 8081);
  CHECK(o->node_id.size() == 36);  // a fresh UUID when MS_NODE_ID is unset
  CHECK(o->node_port == 0);
}

TEST_CASE("each role spelling") {
  for (auto [text, role] : {std::pair{"MS_SCHED", Role::kScheduler},
                            {"MS_PSERVER", Role::kServer},
                            {"MS_SERVER", Role::kServer},
                            {"MS_WORKER", Role::kWorker}}) {
    Env env = Valid();
    env["MS_ROLE"] = text;
    auto o = ParseNodeOptions({}, Lookup(env));
    REQUIRE(o.ok());
    CHECK(o->role == role);
  }
}

TEST_CASE("a missing variable names itself and what it accepts") {
  for (const char* name :
       {"MS_ROLE", "MS_SERVER_NUM", "MS_WORKER_NUM", "MS_SCHED_HOST", "MS_SCHED_PORT"}) {
    CAPTURE(name);
    Env env = Valid();
    env.erase(name);
    std::string error = ErrorOf(env);
    CHECK(error.find(std::string(name) + " (or --") == 0);
    CHECK(error.find("is not set: expected") != std::string::npos);
  }
}

TEST_CASE("the TLS files go together: all three, or none") {
  Env env = Valid();
  auto none = ParseNodeOptions({}, Lookup(env));
  REQUIRE(none.ok());
  CHECK_FALSE(none->cluster.tls.enabled());
  env["PSTRAIN_TLS_CERT"] = "/pki/node.pem";
  env["PSTRAIN_TLS_KEY"] = "/pki/node.key";
  std::string error = ErrorOf(env);
  CHECK(error.find("go together: PSTRAIN_TLS_CA is not set") != std::string::npos);
  env.erase("PSTRAIN_TLS_KEY");
  CHECK(ErrorOf(env).find("PSTRAIN_TLS_KEY and PSTRAIN_TLS_CA are not set") != std::string::npos);
  // A flag completes what the environment began.
  env["PSTRAIN_TLS_KEY"] = "/pki/node.key";
  auto all = ParseNodeOptions({"--tls-ca", "/pki/ca.pem"}, Lookup(env));
  REQUIRE(all.ok());
  CHECK(all->cluster.tls.enabled());
  CHECK(all->cluster.tls.ca == "/pki/ca.pem");
  CHECK(all->cluster.tls.key == "/pki/node.key");
}

TEST_CASE("a malformed variable names itself, its value and what it accepts") {
  struct Case {
    const char* name;
    const char* value;
    const char* expected;
  };
  for (const Case& c :
       {Case{"MS_ROLE", "MS_BOSS", "MS_SCHED, MS_PSERVER (or MS_SERVER) or MS_WORKER"},
        Case{"MS_SERVER_NUM", "two", "an integer from 0 to 65536"},
        Case{"MS_SERVER_NUM", "-1", "an integer from 0 to 65536"},
        Case{"MS_WORKER_NUM", "0", "an integer from 1 to 65536"},
        Case{"MS_WORKER_NUM", "3x", "an integer from 1 to 65536"},
        Case{"MS_SCHED_PORT", "70000", "a port number from 1 to 65535"},
        Case{"MS_SCHED_PORT", "", "a port number from 1 to 65535"},
        Case{"MS_SCHED_HOST", "a b", "a host name or IP address"},
        Case{"MS_NODE_ID", "", "1 to 255 printable characters"},
        Case{"PSTRAIN_HEARTBEAT_TIMEOUT", "soon", "a number of seconds"},
        Case{"PSTRAIN_CONNECT_TIMEOUT", "-3", "a number of seconds"},
        Case{"PSTRAIN_RING_TRANSPORT", "udp", "auto or tcp"}}) {
    CAPTURE(c.name);
    CAPTURE(c.value);
    Env env = Valid();
    env[c.name] = c.value;
    std::string error = ErrorOf(env);
    CHECK(error.find(std::string(c.name) + " is '" + c.value + "': expected ") == 0);
    CHECK(error.find(c.expected) != std::string::npos);
  }
}

TEST_CASE("flags override the environment and are named in errors") {
  auto o = ParseNodeOptions(
      {"--role", "MS_PSERVER", "--workers=7", "--sched-port", "9000", "--node-id", "srv-a"},
      Lookup(Valid()));
  REQUIRE(o.ok());
  CHECK(o->role == Role::kServer);
  CHECK(o->cluster.worker_num == 7);
  CHECK(o->cluster.sched_port == 9000);
  CHECK(o->node_id == "srv-a");

  CHECK(ErrorOf(Valid(), {"--workers", "many"}) ==
        "--workers is 'many': expected an integer from 1 to 65536");
  CHECK(ErrorOf(Valid(), {"--colour", "red"}).find("unknown flag --colour") == 0);
  CHECK(ErrorOf(Valid(), {"--workers"}).find("--workers: 1 required VALUE missing") == 0);
  CHECK(ErrorOf(Valid(), {"stray"}).find("unexpected argument 'stray'") == 0);
}

TEST_CASE("a requested rank comes from MS_NODE_RANK or --rank, else the scheduler picks") {
  auto unset = ParseNodeOptions({}, Lookup(Valid()));
  REQUIRE(unset.ok());
  CHECK(unset->requested_rank == -1);

  Env env = Valid();  // 3 workers
  env["MS_NODE_RANK"] = "2";
  auto from_env = ParseNodeOptions({}, Lookup(env));
  REQUIRE(from_env.ok());
  CHECK(from_env->requested_rank == 2);

  auto from_flag = ParseNodeOptions({"--rank", "0"}, Lookup(env));
  REQUIRE(from_flag.ok());
  CHECK(from_flag->requested_rank == 0);

  env["MS_ROLE"] = "MS_PSERVER";  // 2 servers
  env["MS_NODE_RANK"] = "1";
  auto server = ParseNodeOptions({}, Lookup(env));
  REQUIRE(server.ok());
  CHECK(server->requested_rank == 1);
}

TEST_CASE("a requested rank outside the role's count names the variable and the range") {
  Env env = Valid();  // 2 servers, 3 workers
  env["MS_NODE_RANK"] = "3";
  CHECK(ErrorOf(env) ==
        "MS_NODE_RANK (or --rank) is '3': expected a worker rank from 0 to 2 (MS_WORKER_NUM is 3)");
  env["MS_ROLE"] = "MS_PSERVER";
  env["MS_NODE_RANK"] = "2";
  CHECK(ErrorOf(env) ==
        "MS_NODE_RANK (or --rank) is '2': expected a server rank from 0 to 1 (MS_SERVER_NUM is 2)");
  // The flag's count is the one checked against.
  CHECK(ErrorOf(env, {"--servers", "1", "--rank", "1"}).find("from 0 to 0 (MS_SERVER_NUM is 1)") !=
        std::string::npos);
  env["MS_ROLE"] = "MS_SCHED";
  env["MS_NODE_RANK"] = "0";
  CHECK(ErrorOf(env).find("the scheduler takes no rank") != std::string::npos);

  for (const char* bad : {"", "one", "-1", "1.5", "4096", "2x"}) {
    CAPTURE(bad);
    Env malformed = Valid();
    malformed["MS_NODE_RANK"] = bad;
    CHECK(ErrorOf(malformed) ==
          std::string("MS_NODE_RANK is '") + bad + "': expected a whole number from 0 to 4095");
    CHECK(ErrorOf(Valid(), {"--rank", bad}).find(std::string("--rank is '") + bad + "'") == 0);
  }
}

TEST_CASE("heartbeat timeout must leave room for missed beats") {
  Env env = Valid();
  env["PSTRAIN_HEARTBEAT_INTERVAL"] = "2";
  env["PSTRAIN_HEARTBEAT_TIMEOUT"] = "3";
  CHECK(ErrorOf(env).find("at least twice") != std::string::npos);
}

TEST_CASE("pstrain local has defaults and needs no MS_* variable") {
  auto o = ParseLocalOptions({}, Lookup({}));
  REQUIRE(o.ok());
  CHECK(o->cluster.server_num == 2);
  CHECK(o->cluster.worker_num == 2);
  auto custom = ParseLocalOptions({"--servers", "1", "--workers", "4"}, Lookup({}));
  REQUIRE(custom.ok());
  CHECK(custom->cluster.server_num == 1);
  CHECK(custom->cluster.worker_num == 4);
  CHECK_FALSE(ParseLocalOptions({"--role", "MS_WORKER"}, Lookup({})).ok());
}

TEST_CASE("the log level: variable, flag over variable, and a bad one named") {
  Env env = Valid();
  auto o = ParseNodeOptions({}, Lookup(env));
  REQUIRE(o.ok());
  CHECK(o->cluster.log_level == "info");
  env["PSTRAIN_LOG_LEVEL"] = "warn";
  o = ParseNodeOptions({}, Lookup(env));
  REQUIRE(o.ok());
  CHECK(o->cluster.log_level == "warn");
  o = ParseNodeOptions({"--log-level", "debug"}, Lookup(env));
  REQUIRE(o.ok());
  CHECK(o->cluster.log_level == "debug");
  env["PSTRAIN_LOG_LEVEL"] = "verbose";
  CHECK(ErrorOf(env) ==
        "PSTRAIN_LOG_LEVEL is 'verbose': expected trace, debug, info, warn, error or off");
  CHECK(ErrorOf(Valid(), {"--log-level=Info"}).find("--log-level is 'Info'") == 0);
}

TEST_CASE("the help names every flag with its variable") {
  const std::string node = NodeOptionsHelp(), local = LocalOptionsHelp();
  for (const char* text : {"--role", "MS_ROLE", "--sched-port", "MS_SCHED_PORT", "--rank",
                           "MS_NODE_RANK", "--log-level", "PSTRAIN_LOG_LEVEL", "--http-port",
                           "PSTRAIN_HTTP_PORT", "--log-dir", "PSTRAIN_LOG_DIR"})
    CHECK_MESSAGE(node.find(text) != std::string::npos, text);
  CHECK(local.find("--servers") != std::string::npos);
  CHECK(local.find("PSTRAIN_LOG_LEVEL") != std::string::npos);
  CHECK(local.find("--role") == std::string::npos);  // local takes no role
}

TEST_CASE("a network mask comes from PSTRAIN_NETWORK_MASK or --network-mask") {
  Env env = Valid();
  env["PSTRAIN_NETWORK_MASK"] = "10.1.0.0/16";
  auto o = ParseNodeOptions({}, Lookup(env));
  REQUIRE(o.ok());
  REQUIRE(o->network_mask.has_value());
  CHECK(o->network_mask->text == "10.1.0.0/16");
  o = ParseNodeOptions({"--network-mask", "198.18.0.0/15"}, Lookup(env));
  REQUIRE(o.ok());
  CHECK(o->network_mask->text == "198.18.0.0/15");
  CHECK_FALSE(ParseNodeOptions({}, Lookup(Valid()))->network_mask.has_value());

  const char* expected =
      "expected a network in CIDR form, its bits past the prefix zero (10.1.0.0/16, fd00::/8)";
  env["PSTRAIN_NETWORK_MASK"] = "10.1.2.3/16";
  CHECK(ErrorOf(env) == std::string("PSTRAIN_NETWORK_MASK is '10.1.2.3/16': ") + expected);
  CHECK(ErrorOf(Valid(), {"--network-mask=eth0"}) ==
        std::string("--network-mask is 'eth0': ") + expected);
}

TEST_CASE("with a network mask a node advertises its address there; MS_NODE_HOST wins") {
  const std::vector<InterfaceAddress> host = {{"lo", "127.0.0.1"}, {"eth1", "198.18.0.3"}};
  Env env = Valid();
  env["PSTRAIN_NETWORK_MASK"] = "198.18.0.0/15";
  auto o = ParseNodeOptions({}, Lookup(env));
  REQUIRE(o.ok());
  auto said = ApplyNetworkMask(&*o, host);
  REQUIRE(said.ok());
  CHECK(o->node_host == "198.18.0.3");
  CHECK(*said == "advertising 198.18.0.3 (eth1), in the network mask 198.18.0.0/15");

  env["MS_NODE_HOST"] = "10.0.0.5";
  o = ParseNodeOptions({}, Lookup(env));
  said = ApplyNetworkMask(&*o, host);
  REQUIRE(said.ok());
  CHECK(o->node_host == "10.0.0.5");
  CHECK(*said ==
        "advertising MS_NODE_HOST 10.0.0.5, which wins over the network mask 198.18.0.0/15");

  // No mask, or the scheduler: nothing changes, nothing to say.
  o = ParseNodeOptions({}, Lookup(Valid()));
  CHECK(ApplyNetworkMask(&*o, host)->empty());
  CHECK(o->node_host.empty());
  env.erase("MS_NODE_HOST");
  env["MS_ROLE"] = "MS_SCHED";
  o = ParseNodeOptions({}, Lookup(env));
  CHECK(ApplyNetworkMask(&*o, {})->empty());
  CHECK(o->node_host.empty());

  env["MS_ROLE"] = "MS_WORKER";
  env["PSTRAIN_NETWORK_MASK"] = "10.9.0.0/16";
  o = ParseNodeOptions({}, Lookup(env));
  said = ApplyNetworkMask(&*o, host);
  REQUIRE_FALSE(said.ok());
  CHECK(said.status().message() ==
        "PSTRAIN_NETWORK_MASK (--network-mask): no interface has an address in 10.9.0.0/16; this "
        "host has 127.0.0.1 (lo), 198.18.0.3 (eth1)");
}

TEST_CASE("the last of a repeated flag wins, as before") {
  auto o = ParseNodeOptions({"--workers", "1", "--workers", "4"}, Lookup(Valid()));
  REQUIRE(o.ok());
  CHECK(o->cluster.worker_num == 4);
}

}  // namespace
}  // namespace pstrain
