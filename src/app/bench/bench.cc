#include "src/app/bench/bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/transport/tls.h"
#include "src/app/bench/kv.h"
#include "src/app/bench/moves.h"
#include "src/app/bench/scheduler.h"
#include "src/app/bench/store.h"
#include "src/app/bench/tiered.h"
#include "src/common/status.h"

namespace pstrain {

Status RunAllReduceBench(const std::vector<int64_t>& sizes, const std::vector<int>& worlds,
                         const std::string& transport, const std::vector<std::string>& netns);
Status RunEmbeddingBench(const std::vector<int>& dims, const std::vector<std::string>& cases);
Status RunCacheBoundCase(const std::string& config_path, const std::vector<int>& worker_counts);
Status RunTrainBench(const std::string& config_path, int64_t steps, const std::vector<int>& servers,
                     const std::vector<int>& workers);
Status RunCompressBench(int64_t elements, const std::vector<double>& densities, int repeats,
                        bool values);

namespace {

// "a,b,c" -> {"a", "b", "c"}; an empty item stays (the parsers reject it).
std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> items;
  size_t at = 0;
  for (size_t comma; (comma = text.find(',', at)) != std::string::npos; at = comma + 1)
    items.push_back(text.substr(at, comma - at));
  items.push_back(text.substr(at));
  return items;
}

// "4096,262144" -> {4096, 262144}; false on anything else.
template <typename T>
bool ParseList(const std::string& text, std::vector<T>* out) {
  out->clear();
  for (const std::string& item : SplitCommas(text)) {
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0) return false;
    out->push_back(static_cast<T>(v));
  }
  return true;
}

// "1e-4,0.5" -> {1e-4, 0.5}: densities in (0, 1]; false on anything else.
bool ParseDensities(const std::string& text, std::vector<double>* out) {
  out->clear();
  for (const std::string& item : SplitCommas(text)) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v > 0 && v <= 1)) return false;
    out->push_back(v);
  }
  return true;
}

// "server,cache" -> {"server", "cache"}: the embedding bench's cases.
bool ParseCases(const std::string& text, std::vector<std::string>* out) {
  *out = SplitCommas(text);
  for (const std::string& item : *out)
    if (item != "server" && item != "pull" && item != "cache" && item != "data" &&
        item != "tiered" && item != "store" && item != "move")
      return false;
  return true;
}

// "a,b" -> {"a", "b"}: names under /run/netns (none: empty text), so no
// '/' and no "..".
bool ParseNamespaces(const std::string& text, std::vector<std::string>* out) {
  out->clear();
  if (text.empty()) return true;
  *out = SplitCommas(text);
  for (const std::string& name : *out)
    if (name.empty() || name.size() > 64 || name == "." || name == ".." ||
        name.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
            std::string::npos)
      return false;
  return true;
}

bool Has(const std::vector<std::string>& items, const char* item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

// The security bench kv runs with: what the environment sets, as a node
// reads it; with --compare, only that part of it, which must be set.
StatusOr<KvSecurity> KvSecurityOf(const std::string& compare) {
  auto env = ParseLocalOptions({}, ProcessEnv());
  if (!env.ok()) return env.status();
  KvSecurity security{env->cluster.tls, env->cluster.token};
  if (compare == "tls") {
    security.token.clear();
    if (!security.tls.enabled())
      return InvalidArgument(
          "--compare tls needs PSTRAIN_TLS_CERT, PSTRAIN_TLS_KEY and PSTRAIN_TLS_CA (see "
          "tests/tools/make_test_certs.sh)");
  } else if (compare == "token") {
    security.tls = {};
    if (security.token.empty()) return InvalidArgument("--compare token needs MS_CLUSTER_TOKEN");
  }
  PSTRAIN_RETURN_IF_ERROR(TlsContext::LoadIfSet(security.tls).status());
  return security;
}

// "--flag N,N,..." into `out` (its current contents are the default).
template <typename T>
CLI::Option* AddList(CLI::App* app, const std::string& flag, std::vector<T>* out,
                     const std::string& what) {
  std::string defaults;
  for (T v : *out) defaults += (defaults.empty() ? "" : ",") + std::to_string(v);
  return app
      ->add_option_function<std::string>(
          flag,
          [flag, out](const std::string& value) {
            if (!ParseList(value, out))
              throw CLI::ValidationError(
                  flag, "'" + value + "': expected positive integers separated by commas");
          },
          what + " (default " + defaults + ")")
      ->type_name("N,N,...");
}

// "--flag WORD" where WORD is one of `words`.
CLI::Option* AddWord(CLI::App* app, const std::string& flag, std::string* out,
                     const std::vector<std::string>& words, const std::string& what) {
  return app->add_option(flag, *out, what)->check(CLI::IsMember(words));
}

// What each benchmark was asked for (defaults as in docs/formats.md, "Benchmark output").
struct BenchArgs {
  std::vector<int64_t> sizes = {4096, 262144, 4194304, 67108864};
  std::vector<int64_t> steps = {300};
  std::vector<int> servers = {1, 2}, workers = {1, 2}, worlds = {2, 4}, dims = {16, 64};
  std::vector<int> train_servers = {2};
  std::vector<int> rounds = {5};
  std::string config, transport = "shm", compare, cases = "server,pull,cache", netns;
  // compress: four densities across the band, and one past the bitmap crossover.
  int64_t elements = 4194304;
  int repeats = 7;
  std::string densities = "1e-4,1e-3,1e-2,1e-1,0.5";
  bool values = false;  // the warm-up's values messages instead of +-tau
  TieredBenchOptions tiered;
  SchedulerBenchOptions scheduler;
};

void DeclareBenchCommands(CLI::App* app, BenchArgs* a) {
  app->require_subcommand(1);
  CLI::App* kv = app->add_subcommand(
      "kv",
      "push+pull round trips of one PS tensor on loopback. Security from PSTRAIN_TLS_CERT, "
      "PSTRAIN_TLS_KEY, PSTRAIN_TLS_CA and MS_CLUSTER_TOKEN, as a node reads them.");
  AddList(kv, "--bytes", &a->sizes, "tensor sizes in bytes, multiples of 4");
  AddList(kv, "--servers", &a->servers, "server counts");
  AddList(kv, "--workers", &a->workers, "worker counts");
  AddWord(kv, "--compare", &a->compare, {"tls", "token"},
          "alternate plaintext runs with runs secured this way");
  AddList(kv, "--rounds", &a->rounds, "rounds of --compare");
  CLI::App* allreduce =
      app->add_subcommand("allreduce", "the CPU ring all-reduce among separate processes");
  AddList(allreduce, "--bytes", &a->sizes, "tensor sizes in bytes, multiples of 4");
  AddList(allreduce, "--world", &a->worlds, "ranks per ring");
  AddWord(allreduce, "--transport", &a->transport, {"shm", "tcp"},
          "shared memory (default) or TCP (on 127.0.0.1 unless --netns)");
  allreduce
      ->add_option("--netns", a->netns,
                   "network namespaces (/run/netns/NAME), one per rank: rank r runs in the r-th "
                   "and listens on its address there (TCP only)")
      ->type_name("NS,NS,...");
  CLI::App* embedding =
      app->add_subcommand("embedding", "sparse tables and row caches on Zipf-distributed ids");
  AddList(embedding, "--dim", &a->dims, "row widths, 1 to 4096");
  embedding->add_option(
      "--cases", a->cases,
      "any of server,pull,cache,data,tiered,store,move (default " + a->cases + ")");
  embedding->add_option("--config", a->config, "the training data of the data case (a config)");
  AddList(embedding, "--workers", &a->workers, "worker counts of the data case");
  embedding->add_option("--store-dir", a->tiered.store_dir,
                        "where the tiered and store cases put their store, in a directory they "
                        "remove at the end (default $TMPDIR, else /tmp)");
  embedding
      ->add_option("--tier-ids", a->tiered.ids,
                   "Zipf ranks of the tiered case, rows of the store and move cases (default "
                   "1000000)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  embedding
      ->add_option("--tier-rounds", a->tiered.rounds,
                   "requests of the tiered case, the second half timed (default 200)")
      ->check(CLI::Range(2, 100000));
  CLI::App* train = app->add_subcommand("train", "training throughput of a config");
  train->add_option("--config", a->config, "the job's YAML config")->required();
  AddList(train, "--steps", &a->steps, "timed steps");
  AddList(train, "--servers", &a->train_servers, "server counts of the ps case");
  AddList(train, "--workers", &a->workers, "worker counts of the ps case");
  CLI::App* compress = app->add_subcommand(
      "compress",
      "threshold encoding and decoding of one tensor on one core (GB/s of dense input)");
  compress->add_option("--elements", a->elements, "floats in the tensor (default 4194304)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 27));
  compress->add_option("--densities", a->densities,
                       "shares of the elements sent, in (0, 1] (default " + a->densities + ")");
  compress->add_flag("--values", a->values,
                     "send exact values, as warm-up messages do, instead of +-tau");
  compress->add_option("--repeats", a->repeats, "timed runs per density, the median reported")
      ->check(CLI::Range(1, 1000));
  CLI::App* scheduler = app->add_subcommand(
      "scheduler",
      "a real scheduler in its own process against many simulated nodes, each with its own "
      "connection: registration, topology, heartbeats, a barrier, the shutdown");
  AddList(scheduler, "--nodes", &a->scheduler.nodes, "node counts, servers and workers together");
  scheduler
      ->add_option("--servers-every", a->scheduler.servers_every,
                   "one server per this many nodes (default 8)")
      ->check(CLI::Range(1, 1 << 20));
  scheduler->add_option("--loops", a->scheduler.loops, "threads of simulated nodes (default 4)")
      ->check(CLI::Range(1, 64));
  scheduler
      ->add_option("--window", a->scheduler.window,
                   "connects and registrations in flight (default 1024)")
      ->check(CLI::Range(1, 1 << 20));
  scheduler
      ->add_option("--heartbeats", a->scheduler.heartbeats,
                   "heartbeats per node before the barrier (default 10)")
      ->check(CLI::Range(0, 10000));
  scheduler
      ->add_option("--timeout", a->scheduler.timeout_s, "seconds per phase of a case (default 120)")
      ->check(CLI::Range(1.0, 3600.0));
  scheduler
      ->add_option("--memory-mb", a->scheduler.memory_mb,
                   "the scheduler's data limit (RLIMIT_DATA), in MiB (default 4096)")
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 20));
  scheduler->add_flag("--recover", a->scheduler.recover,
                      "then lose one worker, replace it with a new node and measure the "
                      "Topology bytes of the recovery");
  scheduler->add_option("--scheduler-bin", a->scheduler.scheduler_bin,
                        "the pstrain executable to run the scheduler with (default: this one)");
}

int Usage(const std::string& which, const std::string& why) {
  std::fprintf(stderr, "pstrain bench %s: %s (see pstrain bench %s --help)\n", which.c_str(),
               why.c_str(), which.c_str());
  return 2;
}

}  // namespace

int RunBench(const std::vector<std::string>& args) {
  BenchArgs a;
  CLI::App app(
      "Benchmarks: one JSON object per line on stdout (docs/formats.md, \"Benchmark output\").",
      "pstrain bench");
  DeclareBenchCommands(&app, &a);
  if (int status = ParseCommandLine(&app, args); status >= 0) return status;
  const std::string which = app.get_subcommands().front()->get_name();
  std::vector<std::string> cases;
  if (which == "embedding" && !ParseCases(a.cases, &cases))
    return Usage(
        which, "--cases is '" + a.cases + "': expected any of server,pull,cache,data,tiered,store");
  Status st;
  if (which == "kv" || which == "allreduce") {
    for (int64_t b : a.sizes)
      if (b % 4 != 0) return Usage(which, "--bytes must be multiples of 4 (float32 tensors)");
  }
  if (which == "kv") {
    if (a.rounds.size() != 1) return Usage(which, "--rounds takes one number");
    auto security = KvSecurityOf(a.compare);
    if (!security.ok()) return Usage(which, security.status().message());
    st = RunKvBench(a.sizes, a.servers, a.workers, *security, a.compare.empty() ? 0 : a.rounds[0]);
  } else if (which == "allreduce") {
    std::vector<std::string> netns;
    if (!ParseNamespaces(a.netns, &netns))
      return Usage(which, "--netns is '" + a.netns +
                              "': expected namespace names (letters, digits, '.', '_', '-') "
                              "separated by commas");
    st = RunAllReduceBench(a.sizes, a.worlds, a.transport, netns);
  } else if (which == "embedding") {
    for (int d : a.dims)
      if (d < 1 || d > 4096) return Usage(which, "--dim must be from 1 to 4096");
    if (Has(cases, "data") && a.config.empty())
      return Usage(which, "the data case needs --config FILE (its training data)");
    st = RunEmbeddingBench(a.dims, cases);
    if (st.ok() && Has(cases, "data")) st = RunCacheBoundCase(a.config, a.workers);
    if (st.ok() && Has(cases, "tiered")) st = RunTieredBench(a.dims, a.tiered);
    if (st.ok() && Has(cases, "store")) st = RunStoreBench(a.dims, a.tiered);
    if (st.ok() && Has(cases, "move")) st = RunMoveBench(a.dims, a.tiered);
  } else if (which == "scheduler") {
    for (int n : a.scheduler.nodes)
      if (n < 2) return Usage(which, "--nodes must be at least 2 (a server and a worker)");
    st = RunSchedulerBench(a.scheduler);
  } else if (which == "compress") {
    std::vector<double> densities;
    if (!ParseDensities(a.densities, &densities))
      return Usage(which, "--densities is '" + a.densities + "': expected numbers in (0, 1]");
    st = RunCompressBench(a.elements, densities, a.repeats, a.values);
  } else {
    if (a.steps.size() != 1) return Usage(which, "--steps takes one number");
    st = RunTrainBench(a.config, a.steps[0], a.train_servers, a.workers);
  }
  if (!st.ok()) {
    std::fprintf(stderr, "pstrain bench %s: %s\n", which.c_str(), st.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace pstrain
