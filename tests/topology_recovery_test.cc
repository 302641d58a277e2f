// Topologies after a rollback (roles/scheduler/scheduler.h, step 3): a node
// that acknowledged an earlier topology gets only the peers that changed
// since, patches its list with them, and ends with the list a whole one
// would have given; a node with none gets the whole list. Nodes run as
// threads of this process with a real scheduler on 127.0.0.1; a node's
// "process" is a loop and a ClusterClient, rebuilt after a pause as
// roles/node/recovery.h rebuilds a real one, with what it kept.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "roles/node/cluster_client.h"
#include "roles/node/peers.h"
#include "roles/scheduler/scheduler.h"
#include "tests/cluster_test_node.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

using testing::CaptureLogger;
using testing::CaptureSink;

using testing::TestNode;

// One node of the job across its runs: the same node id, rank and port.
struct Member {
  Member(Role role, int rank, std::string id, uint16_t port)
      : role(role), rank(rank), id(std::move(id)), port(port) {}
  Role role;
  int rank;
  std::string id;
  uint16_t port;  // advertised only: nothing dials it here
  std::shared_ptr<CaptureSink> sink = std::make_shared<CaptureSink>();
  std::unique_ptr<TestNode> node;
  StatusOr<Topology> joined = Unavailable("not joined");
};

class Job {
 public:
  Job(int servers, int workers) {
    cluster_.server_num = servers;
    cluster_.worker_num = workers;
    cluster_.sched_host = "127.0.0.1";
    cluster_.connect_timeout_s = 20;
    cluster_.recovery_wait_s = 60;  // a lost node pauses the job
    scheduler_ = std::make_unique<Scheduler>(cluster_, CaptureLogger("scheduler", sched_sink));
    auto port = scheduler_->Start();
    REQUIRE(port.ok());
    cluster_.sched_port = *port;
    for (int i = 0; i < servers + workers; ++i) {
      const bool server = i < servers;
      members.push_back(std::make_unique<Member>(
          server ? Role::kServer : Role::kWorker, server ? i : i - servers,
          fmt::format("{}{}", server ? "s" : "w", server ? i : i - servers),
          static_cast<uint16_t>(40000 + i)));
    }
  }

  // Starts a run of `m` (with what its run before kept, if any) and joins.
  void Start(Member& m, std::optional<Topology> recalled) {
    NodeOptions o;
    o.role = m.role;
    o.cluster = cluster_;
    o.node_id = m.id;
    o.requested_rank = m.rank;
    m.node = std::make_unique<TestNode>(o, CaptureLogger(m.id, m.sink));
    if (recalled) m.node->client.Recall(std::move(*recalled));
  }
  // Joins every member whose node is started, together.
  void JoinAll() {
    std::vector<std::thread> threads;
    for (auto& m : members)
      threads.emplace_back([&m] { m->joined = m->node->client.Join(m->port); });
    for (std::thread& t : threads) t.join();
    for (auto& m : members)
      REQUIRE_MESSAGE(m->joined.ok(), m->id, ": ", m->joined.status().message());
  }
  Member& WorkerAt(int rank) { return *members[cluster_.server_num + rank]; }

  // The scheduler dies and a new one starts on its port; the nodes rejoin it.
  void RestartScheduler() {
    scheduler_.reset();
    scheduler_ = std::make_unique<Scheduler>(cluster_, CaptureLogger("scheduler", sched_sink));
    REQUIRE(scheduler_->Start().ok());
  }

  // The workers report Done; every node gets the Shutdown.
  void Finish() {
    for (auto& m : members)
      if (m->role == Role::kWorker) CHECK(m->node->client.ReportDone().ok());
    for (auto& m : members) CHECK(m->node->client.WaitForShutdown().ok());
    CHECK(scheduler_->Wait().ok());
  }

  std::shared_ptr<CaptureSink> sched_sink = std::make_shared<CaptureSink>();
  std::vector<std::unique_ptr<Member>> members;

 private:
  ClusterOptions cluster_;
  std::unique_ptr<Scheduler> scheduler_;
};

// The one line a node logs for the topology of `generation`.
std::string TopologyLine(Member& m, int generation) {
  auto lines = m.sink->Matching(fmt::format("topology of generation {}:", generation));
  REQUIRE_MESSAGE(lines.size() == 1, m.id, " logged ", lines.size(), " topologies of generation ",
                  generation);
  return lines[0];
}

// Worker `lost` of the job is replaced by a new node (another node id,
// another port); every other node rolls back, keeping what it had. Returns
// once every node has joined generation 1.
void LoseAndReplace(Job& job, int lost, const std::set<std::string>& forgetful = {}) {
  Member& victim = job.WorkerAt(lost);
  victim.node.reset();  // its process dies: the scheduler pauses the job
  for (auto& m : job.members) {
    if (m.get() == &victim) continue;
    // Pause is the verdict of this run; the node is rebuilt with what it kept.
    Status paused = m->node->client.WaitForShutdown();
    REQUIRE_MESSAGE(m->node->client.paused(), m->id, ": ", paused.message());
    std::optional<Topology> kept = m->node->client.Held();
    REQUIRE(kept.has_value());
    m->node.reset();
    job.Start(*m, forgetful.count(m->id) ? std::nullopt : std::move(kept));
  }
  victim.id += "-new";
  victim.port = static_cast<uint16_t>(victim.port + 1000);
  job.Start(victim, std::nullopt);
  job.JoinAll();
}

TEST_CASE("after a worker is replaced, each node gets only the peers that changed") {
  const int servers = 3, workers = 6;
  Job job(servers, workers);
  for (auto& m : job.members) job.Start(*m, std::nullopt);
  job.JoinAll();
  for (auto& m : job.members)
    CHECK(TopologyLine(*m, 0).find("the whole list") != std::string::npos);

  const int lost = 2;
  LoseAndReplace(job, lost);
  const int peers = servers + 2;  // a worker's: every server, two ring neighbours
  for (auto& m : job.members) {
    INFO(m->id);
    const std::string line = TopologyLine(*m, 1);
    INFO(line);
    if (m.get() == &job.WorkerAt(lost)) {
      // The replacement holds nothing yet.
      CHECK(line.find(fmt::format("the whole list of {} peers", peers)) != std::string::npos);
    } else if (m->role == Role::kServer) {
      CHECK(line.find("0 of 0 peers changed (a delta from generation 0)") != std::string::npos);
    } else if (m->rank == lost - 1 || m->rank == lost + 1) {
      CHECK(line.find(fmt::format("1 of {} peers changed (a delta from generation 0)", peers)) !=
            std::string::npos);
    } else {
      CHECK(line.find(fmt::format("0 of {} peers changed (a delta from generation 0)", peers)) !=
            std::string::npos);
    }
  }
  // Patched, each list is what the whole one says: the replacement where
  // the lost worker was, everyone else where they were.
  std::map<std::pair<Role, int>, const Member*> by_rank;
  for (auto& m : job.members) by_rank[{m->role, m->rank}] = m.get();
  for (auto& m : job.members) {
    const Topology& t = *m->joined;
    CHECK(t.generation == 1);
    CHECK_FALSE(t.delta());
    CHECK(CheckTopology(t, m->role, m->rank, servers, workers).ok());
    for (const NodeInfo& n : t.nodes) {
      const Member* peer = by_rank.at({n.role, n.rank});
      CHECK(n.node_id == peer->id);
      CHECK(n.port == peer->port);
    }
  }
  CHECK(job.sched_sink->Matching("refused the topology delta").empty());
  job.Finish();
}

TEST_CASE("a node that comes back without its topology refuses the delta and gets the whole list") {
  Job job(1, 4);
  for (auto& m : job.members) job.Start(*m, std::nullopt);
  job.JoinAll();
  // Worker 0 is a new process with its old node id (the scheduler cannot
  // tell): the delta it is sent names a base it does not hold.
  LoseAndReplace(job, 2, {"w0"});
  Member& w0 = job.WorkerAt(0);
  CHECK(w0.sink
            ->Matching("refused a topology delta from generation 0, and this node holds no "
                       "topology: asking the scheduler for the whole list")
            .size() == 1);
  CHECK(TopologyLine(w0, 1).find("the whole list of 3 peers") != std::string::npos);
  CHECK(job.sched_sink->Matching("node id:w0 (rank 0, 127.0.0.1:40001) refused the topology delta")
            .size() == 1);
  CHECK(TopologyLine(job.WorkerAt(1), 1).find("1 of 3 peers changed") != std::string::npos);
  job.Finish();
}

TEST_CASE("a restarted scheduler sends the nodes that rejoin it only what changed: nothing") {
  Job job(2, 3);
  for (auto& m : job.members) job.Start(*m, std::nullopt);
  job.JoinAll();
  job.RestartScheduler();  // knows nothing of what the nodes hold but what they say
  for (auto& m : job.members) {
    INFO(m->id);
    REQUIRE(m->sink->WaitFor("re-joined the restarted scheduler"));
    REQUIRE(m->sink->WaitFor("topology of generation 0:", 2));
    auto lines = m->sink->Matching("topology of generation 0:");
    REQUIRE(lines.size() == 2);  // the whole list at start, then the delta
    INFO(lines[1]);
    CHECK(lines[1].find(fmt::format("0 of {} peers changed (a delta from generation 0)",
                                    m->role == Role::kServer ? 0 : 4)) != std::string::npos);
  }
  job.Finish();
}

// The node's side of a delta, held to the whole list's rules.
NodeInfo Peer(Role role, int rank, const std::string& id) {
  return NodeInfo{id, role, "127.0.0.1", static_cast<uint16_t>(5000 + rank), rank};
}

TEST_CASE("a delta is checked as strictly as the whole list, and applies only to its base") {
  // Worker 1 of 2 servers and 4 workers talks to servers 0, 1 and workers 2, 0.
  const Role w = Role::kWorker, s = Role::kServer;
  Topology held{{Peer(s, 0, "s0"), Peer(s, 1, "s1"), Peer(w, 2, "w2"), Peer(w, 0, "w0")}, 3, 2, 4};
  REQUIRE(CheckTopology(held, w, 1, 2, 4).ok());
  auto apply = [&](const Topology& t, const Topology* base = nullptr) {
    return ApplyTopology(base, t, w, 1, 2, 4);
  };
  Topology delta{{Peer(w, 2, "w2-new")}, 4, 2, 4, 3};
  auto patched = apply(delta, &held);
  REQUIRE_MESSAGE(patched.ok(), patched.status().message());
  CHECK(patched->generation == 4);
  CHECK_FALSE(patched->delta());
  REQUIRE(patched->nodes.size() == 4);
  CHECK(patched->nodes[2].node_id == "w2-new");
  CHECK(patched->nodes[0].node_id == "s0");

  auto code = [](const StatusOr<Topology>& r) { return r.status().code(); };
  // Not this node's to patch: the scheduler sends the whole list then.
  CHECK(code(apply(delta)) == StatusCode::kFailedPrecondition);
  Topology other_base = delta;
  other_base.base_generation = 2;
  CHECK(code(apply(other_base, &held)) == StatusCode::kFailedPrecondition);
  // Wrong whatever this node holds: not a peer, out of range, twice, the
  // scheduler itself, another shape.
  for (const std::vector<NodeInfo>& nodes : {std::vector<NodeInfo>{Peer(w, 3, "w3")},
                                             {Peer(w, 9, "w9")},
                                             {Peer(s, 2, "s2")},
                                             {Peer(s, -1, "s")},
                                             {Peer(s, 0, "s0"), Peer(s, 0, "s0-again")},
                                             {Peer(Role::kScheduler, 0, "sched")}}) {
    Topology bad = delta;
    bad.nodes = nodes;
    const auto r = apply(bad, &held);
    INFO(nodes[0].node_id, " rank ", nodes[0].rank);
    CHECK(code(r) == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find("wrongly for worker rank 1") != std::string::npos);
  }
  Topology reshaped = delta;
  reshaped.server_num = 3;
  CHECK(code(apply(reshaped, &held)) == StatusCode::kInvalidArgument);
  // A delta may list none; a whole list must list every peer.
  Topology empty_delta{{}, 4, 2, 4, 3};
  CHECK(apply(empty_delta, &held).ok());
  Topology short_whole{{Peer(s, 0, "s0")}, 4, 2, 4};
  CHECK(code(apply(short_whole, &held)) == StatusCode::kInvalidArgument);
}

TEST_CASE("a topology's digest ignores the order of its entries and nothing else") {
  const Role w = Role::kWorker, s = Role::kServer;
  const std::vector<NodeInfo> list = {Peer(s, 0, "s0"), Peer(w, 2, "w2"), Peer(w, 0, "w0")};
  const uint64_t digest = TopologyDigest(list, 3, 1, 3);
  CHECK(TopologyDigest({list[2], list[0], list[1]}, 3, 1, 3) == digest);
  CHECK(TopologyDigest(list, 4, 1, 3) != digest);
  CHECK(TopologyDigest({list[0], list[1]}, 3, 1, 3) != digest);
  // An elastic job's shape changes with the same peers (a server's list is empty).
  CHECK(TopologyDigest(list, 3, 1, 4) != digest);
  CHECK(TopologyDigest(list, 3, 2, 3) != digest);
  for (int field = 0; field < 4; ++field) {
    std::vector<NodeInfo> changed = list;
    NodeInfo& n = changed[1];
    if (field == 0) n.node_id += "x";
    if (field == 1) n.host = "127.0.0.2";
    if (field == 2) ++n.port;
    if (field == 3) n.rank = 3;
    CHECK(TopologyDigest(changed, 3, 1, 3) != digest);
  }
}

}  // namespace
}  // namespace pstrain
