#include "src/app/bench.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/tls.h"
#include "src/app/bench_kv.h"
#include "src/common/status.h"

namespace pstrain {

Status RunAllReduceBench(const std::vector<int64_t>& sizes, const std::vector<int>& worlds,
                         const std::string& transport);
Status RunEmbeddingBench(const std::vector<int>& dims, const std::vector<std::string>& cases);
Status RunCacheBoundCase(const std::string& config_path, const std::vector<int>& worker_counts);
Status RunTrainBench(const std::string& config_path, int64_t steps, const std::vector<int>& servers,
                     const std::vector<int>& workers);

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

// "server,cache" -> {"server", "cache"}: the embedding bench's cases.
bool ParseCases(const std::string& text, std::vector<std::string>* out) {
  *out = SplitCommas(text);
  for (const std::string& item : *out)
    if (item != "server" && item != "pull" && item != "cache" && item != "data") return false;
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

int Usage(const char* why) {
  std::fprintf(stderr,
               "pstrain bench: %s\n"
               "usage: pstrain bench kv [--bytes N,N,...] [--servers N,N] [--workers N,N]\n"
               "                        [--compare tls|token [--rounds N]]   (PSTRAIN_TLS_*, "
               "MS_CLUSTER_TOKEN)\n"
               "       pstrain bench allreduce [--bytes N,N,...] [--world N,N] "
               "[--transport shm|tcp]\n"
               "       pstrain bench embedding [--dim N,N] [--cases server,pull,cache,data]\n"
               "                               [--config FILE --workers N,N]   (case data)\n"
               "       pstrain bench train --config FILE [--steps N] [--servers N,N] "
               "[--workers N,N]\n",
               why);
  return 2;
}

}  // namespace

int RunBench(const std::vector<std::string>& args) {
  if (args.empty()) return Usage("which benchmark? (kv, allreduce, embedding, train)");
  const std::string& which = args[0];
  if (which != "kv" && which != "train" && which != "allreduce" && which != "embedding")
    return Usage(("unknown benchmark '" + which + "'").c_str());
  std::vector<int64_t> sizes = {4096, 262144, 4194304, 67108864};
  std::vector<int64_t> steps = {300};
  std::vector<int> servers = {1, 2}, workers = {1, 2}, worlds = {2, 4}, dims = {16, 64};
  std::string config, transport = "shm", compare;
  std::vector<int> rounds = {5};
  std::vector<std::string> cases = {"server", "pull", "cache"};
  if (which == "train") servers = {2};
  for (size_t i = 1; i < args.size(); i += 2) {
    if (i + 1 >= args.size()) return Usage((args[i] + " needs a value").c_str());
    const std::string& flag = args[i];
    const std::string& value = args[i + 1];
    bool ok = flag == "--bytes"       ? ParseList(value, &sizes)
              : flag == "--steps"     ? ParseList(value, &steps) && steps.size() == 1
              : flag == "--servers"   ? ParseList(value, &servers)
              : flag == "--workers"   ? ParseList(value, &workers)
              : flag == "--world"     ? ParseList(value, &worlds)
              : flag == "--dim"       ? ParseList(value, &dims)
              : flag == "--config"    ? (config = value, true)
              : flag == "--transport" ? (transport = value, value == "shm" || value == "tcp")
              : flag == "--cases"     ? ParseCases(value, &cases)
              : flag == "--compare"   ? (compare = value, value == "tls" || value == "token")
              : flag == "--rounds"    ? ParseList(value, &rounds) && rounds.size() == 1
                                      : false;
    if (!ok) return Usage(("bad flag or value: " + flag + " " + value).c_str());
  }
  Status st;
  if (which == "kv") {
    for (int64_t b : sizes)
      if (b % 4 != 0) return Usage("--bytes must be multiples of 4 (float32 tensors)");
    auto security = KvSecurityOf(compare);
    if (!security.ok()) {
      std::fprintf(stderr, "pstrain bench kv: %s\n", security.status().message().c_str());
      return 2;
    }
    st = RunKvBench(sizes, servers, workers, *security, compare.empty() ? 0 : rounds[0]);
  } else if (which == "allreduce") {
    for (int64_t b : sizes)
      if (b % 4 != 0) return Usage("--bytes must be multiples of 4 (float32 tensors)");
    st = RunAllReduceBench(sizes, worlds, transport);
  } else if (which == "embedding") {
    for (int d : dims)
      if (d < 1 || d > 4096) return Usage("--dim must be from 1 to 4096");
    if (Has(cases, "data") && config.empty())
      return Usage("the data case needs --config FILE (its training data)");
    st = RunEmbeddingBench(dims, cases);
    if (st.ok() && Has(cases, "data")) st = RunCacheBoundCase(config, workers);
  } else {
    if (config.empty()) return Usage("bench train needs --config FILE");
    st = RunTrainBench(config, steps[0], servers, workers);
  }
  if (!st.ok()) {
    std::fprintf(stderr, "pstrain bench %s: %s\n", which.c_str(), st.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace pstrain
