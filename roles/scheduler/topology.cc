// Scheduler step 3 (roles/scheduler/scheduler.h): once every rank is held,
// each node gets the Topology of the peers it talks to.
#include "roles/node/peers.h"
#include "roles/scheduler/scheduler.h"

namespace pstrain {

// 3. Each node gets the peers it talks to (roles/node/peers.h). Only so many
// Topology entries are unanswered at once: the job's topologies together
// grow with workers x servers (600 MB for 8,750 workers of 1,250 servers),
// and queueing them all at once would hold them all in memory.
void Scheduler::SendTopology() {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  auto round = std::make_shared<TopologyRound>();
  for (NodeEntry* n : AllNodes()) round->nodes.push_back({n->info.role, n->info.rank});
  topology_round_ = round;  // an earlier round still under way sends no more
  PumpTopology(round);
}

void Scheduler::PumpTopology(const std::shared_ptr<TopologyRound>& round) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  // A call that fails at once answers inside the loop below.
  if (round != topology_round_ || round->pumping) return;
  round->pumping = true;
  while (round->in_flight < kTopologyEntriesInFlight && round->next < round->nodes.size()) {
    const auto [role, rank] = round->nodes[round->next++];
    const NodeEntry& n = NodesOf(role)[rank];
    auto conn = n.conn.lock();
    if (!conn || conn->closed()) continue;
    Topology topology = TopologyFor(n);
    const size_t entries = topology.nodes.size() + 1;
    round->in_flight += entries;
    conn->Call(
        std::move(topology), [this, round, entries, who = Describe(n)](StatusOr<Incoming> reply) {
          if (!reply.ok())
            log_->warn("sending the topology to {} failed: {}", who, reply.status().message());
          round->in_flight -= entries;
          PumpTopology(round);
        });
  }
  round->pumping = false;
}

Topology Scheduler::TopologyFor(const NodeEntry& node) {
  Topology topology;
  topology.generation = generation_;
  topology.server_num = static_cast<int>(servers_.size());
  topology.worker_num = static_cast<int>(workers_.size());
  for (const PeerRank& p :
       PeersOf(node.info.role, node.info.rank, topology.server_num, topology.worker_num))
    topology.nodes.push_back(NodesOf(p.role)[p.rank].info);
  return topology;
}

}  // namespace pstrain
