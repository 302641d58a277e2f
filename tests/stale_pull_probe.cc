// stale_pull_probe: pulls, as worker 0, the first partition a server rank
// holds, and says whether the server answered with its weights.
//
// tests/replication_test.sh ("stop") starts it against a server stopped
// with SIGSTOP after its backup took its partitions over, then wakes the
// server: whatever it holds then is stale, and it must never answer.
//
// Usage: stale_pull_probe CONFIG HOST PORT RANK SERVERS GENERATION
// Exit: 0 the pull was refused or its link closed unanswered (it says
// which), 1 the server answered with weights, 2 the probe could not ask
// (bad arguments, no link, its Hello refused).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
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
  if (argc != 7) return Inconclusive("usage: CONFIG HOST PORT RANK SERVERS GENERATION");
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
  std::printf("stale_pull_probe: server %d took the Hello; pulling '%s' partition %u\n", rank,
              tensor.c_str(), part.part);

  Completion<StatusOr<Incoming>> answer;
  PullRequest pull{tensor, part.part, 0, 0, part.elements};
  Connection::Ptr conn = (*links)[static_cast<size_t>(rank)];
  loop.Post([conn, pull, answer] {
    conn->Call(pull, [answer](StatusOr<Incoming> reply) { answer.Set(std::move(reply)); });
  });
  auto reply = answer.WaitFor(std::chrono::seconds(60));
  if (!reply) return Inconclusive("no answer and no close within 60 s");
  if (!reply->ok()) {
    std::printf("stale_pull_probe: not answered: %s\n", reply->status().message().c_str());
    return 0;
  }
  if (std::holds_alternative<Moved>((*reply)->message.body)) {
    std::printf("stale_pull_probe: not answered: the partition moved\n");
    return 0;
  }
  std::printf("stale_pull_probe: answered with %s, %llu payload bytes\n",
              MessageName((*reply)->message.body),
              static_cast<unsigned long long>((*reply)->payload.size));
  return 1;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) { return pstrain::Probe(argc, argv); }
