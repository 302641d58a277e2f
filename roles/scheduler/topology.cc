// Scheduler step 3 (roles/scheduler/scheduler.h): once every rank is held,
// each node gets the Topology of the peers it talks to: the whole list the
// first time, and after a rollback or a rejoin only what changed.
#include <fmt/format.h>

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
  round->number = ++topology_rounds_;
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
    SendTopologyTo(round, role, rank, /*whole=*/false);
  }
  round->pumping = false;
}

void Scheduler::SendTopologyTo(const std::shared_ptr<TopologyRound>& round, Role role, int rank,
                               bool whole) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  NodeEntry& n = NodesOf(role)[rank];
  auto conn = n.conn.lock();
  if (!conn || conn->closed()) return;
  Topology topology = TopologyFor(n, whole);
  // 9. Knowing nothing of what it acknowledged, the scheduler takes its word
  // for the list it holds when the digest matches: a delta of no entries.
  if (!whole && !topology.delta() && n.claimed_generation >= 0 &&
      n.claimed_generation <= topology.generation &&
      TopologyDigest(topology.nodes, n.claimed_generation, topology.server_num,
                     topology.worker_num) == n.claimed_digest) {
    topology.base_generation = n.claimed_generation;
    topology.nodes.clear();
  }
  n.claimed_generation = -1;  // what it holds is this Topology's business now
  // Until it answers, what it holds is not known: the next round sends it
  // the whole list.
  n.acked_round = 0;
  const bool delta = topology.delta();
  const int64_t generation = topology.generation;
  const size_t entries = topology.nodes.size() + 1;
  round->in_flight += entries;
  std::weak_ptr<Connection> sent_on = conn;
  conn->Call(std::move(topology), [this, round, role, rank, delta, generation, entries, sent_on,
                                   who = Describe(n)](StatusOr<Incoming> reply) {
    round->in_flight -= entries;
    NodeEntry& now = NodesOf(role)[rank];
    auto on = sent_on.lock();
    const bool same_node = on && now.conn.lock() == on;  // not replaced meanwhile
    if (reply.ok()) {
      if (same_node) {
        now.acked_round = round->number;
        now.acked_generation = generation;
      }
    } else if (delta && same_node && round == topology_round_ &&
               reply.status().code() == StatusCode::kFailedPrecondition) {
      // It holds no topology of that generation (a process restarted with
      // its node id): the whole list.
      log_->info("{} refused the topology delta ({}): sending it the whole list", who,
                 reply.status().message());
      SendTopologyTo(round, role, rank, /*whole=*/true);
    } else {
      log_->warn("sending the topology to {} failed: {}", who, reply.status().message());
    }
    PumpTopology(round);
  });
}

// A delta lists the peers whose entry changed after the round the node
// acknowledged last: every change after that round's start went to no frame
// of it, or to some only (a node admitted while the round was under way),
// and a peer listed twice over two deltas is harmless.
Topology Scheduler::TopologyFor(const NodeEntry& node, bool whole) const {
  Topology topology;
  topology.generation = generation_;
  topology.server_num = static_cast<int>(servers_.size());
  topology.worker_num = static_cast<int>(workers_.size());
  const bool delta = !whole && node.acked_round > 0;
  if (delta) topology.base_generation = node.acked_generation;
  const auto& nodes_of = [this](Role role) -> const std::vector<NodeEntry>& {
    return role == Role::kServer ? servers_ : workers_;
  };
  for (const PeerRank& p : PeersOf(node.info.role, node.info.rank, topology.server_num,
                                   topology.worker_num, replicas_)) {
    const NodeEntry& peer = nodes_of(p.role)[p.rank];
    if (!delta || peer.entry_changed_round > node.acked_round) topology.nodes.push_back(peer.info);
  }
  return topology;
}

// The same node id, not lost, is the same process (registered again after
// a pause, or rejoined): it holds what it acknowledged. A new node id, or a
// lost node back with its id (a restart), holds nothing.
void Scheduler::CarryTopologyRecord(const NodeEntry& before, NodeEntry* after) const {
  const NodeInfo& a = before.info;
  const NodeInfo& b = after->info;
  const bool moved = a.node_id != b.node_id || a.host != b.host || a.port != b.port;
  after->entry_changed_round = moved ? topology_rounds_ + 1 : before.entry_changed_round;
  if (a.node_id == b.node_id && !before.lost) {
    after->acked_round = before.acked_round;
    after->acked_generation = before.acked_generation;
  }
}

}  // namespace pstrain
