// stale_pull_probe: introduces itself to a server as worker 0, waits until
// the file GO exists, then pulls the first partition the server's rank
// holds, and says how the server answered.
//
// tests/replication_test.sh ("stop") starts it against a live server,
// stops the server (SIGSTOP), lets its backup take its partitions over,
// creates GO (the pull then waits in the sleeping server's socket) and
// wakes the server: whatever it holds then is stale, and it must never
// answer. Against a live server it gets the weights.
//
// Usage: stale_pull_probe CONFIG HOST PORT RANK SERVERS GENERATION GO
// Exit: 0 the link closed with the pull unanswered, 1 the server answered
// with weights, 3 it refused the pull with an error (both print it), 2 the
// probe could not ask (bad arguments, no link, its Hello refused, no GO
// within 120 s).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "comm/ps/partition_map.h"
#include "comm/transport/completion.h"
#include "comm/transport/event_loop.h"
#include "roles/checkpoint/model_layout.h"
#include "roles/node/server_links.h"
#include "src/common/config/config.h"
#include "src/common/logging.h"

namespace pstrain {
namespace {

int Inconclusive(const std::string& why) {
  std::fprintf(stderr, "stale_pull_probe: could not ask: %s\n", why.c_str());
  return 2;
}

// The first partition of `rank` among `servers`, as the workers place them.
StatusOr<std::pair<std::string, Partition>> FirstPartitionOf(const Config& config, int rank,
                                                             int servers) {
  auto layout = LayoutOf(config);
  if (!layout.ok()) return layout.status();
  std::vector<TensorSpec> tensors;
  for (const LayoutTensor& t : layout->tensors)
    if (t.place == WeightPlace::kServers) tensors.push_back({t.name, NumElements(t.shape)});
  auto map = PartitionMap::Build(tensors, servers, config.train.partition_bytes);
  if (!map.ok()) return map.status();
  for (size_t t = 0; t < map->tensors().size(); ++t)
    for (const Partition& p : map->partitions(static_cast<int>(t)))
      if (p.server == rank) return std::make_pair(map->tensors()[t].name, p);
  return NotFound(fmt::format("server {} holds no partition", rank));
}

int Probe(int argc, char** argv) {
  if (argc != 8) return Inconclusive("usage: CONFIG HOST PORT RANK SERVERS GENERATION GO");
  auto config = LoadConfig(argv[1]);
  if (!config.ok()) return Inconclusive(config.status().message());
  const int rank = std::atoi(argv[4]);
  auto first = FirstPartitionOf(*config, rank, std::atoi(argv[5]));
  if (!first.ok()) return Inconclusive(first.status().message());
  const auto& [tensor, part] = *first;

  EventLoop loop;
  if (Status st = loop.Start(); !st.ok()) return Inconclusive(st.message());
  Hello hello;
  hello.node = NodeInfo{"stale-pull-probe", Role::kWorker, "", 0, 0};
  hello.generation = std::atoll(argv[6]);
  NodeInfo server{"", Role::kServer, argv[2], static_cast<uint16_t>(std::atoi(argv[3])), rank};
  auto links =
      ConnectToServers(&loop, MakeLogger("probe"), hello, {server}, static_cast<size_t>(rank) + 1);
  if (!links.ok()) return Inconclusive("Hello: " + links.status().message());
  std::printf("stale_pull_probe: server %d took the Hello\n", rank);
  std::fflush(stdout);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!std::filesystem::exists(argv[7])) {
    if (std::chrono::steady_clock::now() > deadline) return Inconclusive("no GO within 120 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("stale_pull_probe: pulling '%s' partition %u\n", tensor.c_str(), part.part);
  std::fflush(stdout);

  Completion<StatusOr<Incoming>> answer;
  PullRequest pull{tensor, part.part, 0, 0, part.elements};
  Connection::Ptr conn = (*links)[static_cast<size_t>(rank)];
  loop.Post([conn, pull, answer] {
    conn->Call(pull, [answer](StatusOr<Incoming> reply) { answer.Set(std::move(reply)); });
  });
  auto reply = answer.WaitFor(std::chrono::seconds(60));
  if (!reply) return Inconclusive("no answer and no close within 60 s");
  if (!reply->ok()) {
    // A refusal comes as FailedPrecondition (comm/transport/connection.cc).
    const bool refused = reply->status().code() == StatusCode::kFailedPrecondition;
    std::printf("stale_pull_probe: %s: %s\n", refused ? "refused" : "not answered",
                reply->status().message().c_str());
    return refused ? 3 : 0;
  }
  if (std::holds_alternative<Moved>((*reply)->message.body)) {
    std::printf("stale_pull_probe: refused: the partition moved\n");
    return 3;
  }
  std::printf("stale_pull_probe: answered with %s, %llu payload bytes\n",
              MessageName((*reply)->message.body),
              static_cast<unsigned long long>((*reply)->payload.size));
  return 1;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) { return pstrain::Probe(argc, argv); }
