// The scheduler protocol with real sockets on 127.0.0.1: ranks, topology,
// barriers, refusals, re-registration, heartbeats and shutdown. Nodes run as
// threads of this process.
#include "roles/scheduler/scheduler.h"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "comm/transport/frame.h"
#include "roles/local_job.h"
#include "roles/node/cluster_client.h"
#include "roles/node/peers.h"
#include "roles/server/server.h"
#include "roles/worker/checkpointing.h"
#include "roles/worker/worker.h"
#include "tests/cluster_test_node.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

using testing::CaptureLogger;
using testing::CaptureSink;

ClusterOptions Shape(int servers, int workers) {
  ClusterOptions c;
  c.server_num = servers;
  c.worker_num = workers;
  c.sched_host = "127.0.0.1";
  c.sched_port = 0;
  c.connect_timeout_s = 10;
  return c;
}

NodeOptions NodeFor(Role role, const ClusterOptions& cluster, uint16_t port,
                    const std::string& id = "") {
  NodeOptions o;
  o.role = role;
  o.cluster = cluster;
  o.cluster.sched_port = port;
  o.node_id = id.empty() ? MakeNodeId() : id;
  return o;
}

using testing::TestNode;

// `node`, one worker of a 2-worker job, takes part to the end: the barrier,
// Done, the shutdown. Then the other worker's thread and the scheduler end.
void FinishJob(TestNode& node, std::thread& other, Scheduler& scheduler) {
  // The start barrier of every node: agreeing on the step to resume from.
  CHECK(AgreeOnResume(node.client, CheckpointRef{0, "", {}, ""}, "test node").ok());
  CHECK(node.client.ReportDone().ok());
  CHECK(node.client.WaitForShutdown().ok());
  other.join();
  CHECK(scheduler.Wait().ok());
}

// Sends `bytes` to 127.0.0.1:port on a plain socket, then closes it.
void SendRaw(uint16_t port, const std::vector<uint8_t>& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  // Wait for the scheduler to close its end (it read a bad frame): read
  // returns 0 at EOF.
  char c;
  while (read(fd, &c, 1) > 0) {
  }
  close(fd);
}

TEST_CASE("a local job of 2 servers and 2 workers registers, passes a barrier and ends") {
  auto sink = std::make_shared<CaptureSink>();
  LocalJobOptions job;
  job.cluster = Shape(2, 2);
  job.make_logger = [sink](const std::string& name) { return CaptureLogger(name, sink); };
  Status status = RunLocalJob(job);  // OK includes: every event loop closed clean
  REQUIRE_MESSAGE(status.ok(), status.message());

  for (const char* role : {"server", "worker"}) {
    auto lines = sink->Matching(std::string("The ") + role + " node id:");
    REQUIRE(lines.size() == 2);
    std::set<std::string> ranks;
    for (const std::string& l : lines) {
      CHECK(l.find(",node ip: 127.0.0.1,node port:") != std::string::npos);
      ranks.insert(l.substr(l.find("assign rank id:") + 15));
    }
    CHECK(ranks == std::set<std::string>{"0", "1"});
  }
  auto all = sink->Lines();
  auto at = [&](const std::string& needle) {
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].find(needle) != std::string::npos) return i;
    return all.size();
  };
  CHECK(sink->Matching("Start the scheduler node is successful!").size() == 1);
  CHECK(at("Start the scheduler node is successful!") > at("assign rank id:1"));
  CHECK(sink->Matching("stops: the job is over").size() == 4);
  CHECK(sink->Matching("connected from").size() == 4);  // each worker greeted each server
}

TEST_CASE("a larger job of 8 servers and 16 workers registers cleanly") {
  auto sink = std::make_shared<CaptureSink>();
  LocalJobOptions job;
  job.cluster = Shape(8, 16);
  job.make_logger = [sink](const std::string& name) { return CaptureLogger(name, sink); };
  auto start = std::chrono::steady_clock::now();
  Status status = RunLocalJob(job);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  REQUIRE_MESSAGE(status.ok(), status.message());
  CHECK(sink->Matching("assign rank id:").size() == 24);
  CHECK(sink->Matching("stops: the job is over").size() == 24);
  MESSAGE("8 servers + 16 workers: whole job in " << ms << " ms");
}

TEST_CASE("a worker's topology lists the servers and its ring neighbours, a server's no node") {
  auto sink = std::make_shared<CaptureSink>();
  const int servers = 2, workers = 5;
  ClusterOptions cluster = Shape(servers, workers);
  Scheduler scheduler(cluster, CaptureLogger("scheduler", sink));
  auto port = scheduler.Start();
  REQUIRE(port.ok());
  std::vector<std::unique_ptr<TestNode>> nodes;
  for (int i = 0; i < servers + workers; ++i)
    nodes.push_back(std::make_unique<TestNode>(NodeFor(i < servers ? Role::kServer : Role::kWorker,
                                                       cluster, *port, fmt::format("node-{}", i)),
                                               CaptureLogger(fmt::format("node-{}", i), sink)));
  std::vector<StatusOr<Topology>> joined(nodes.size(), Unavailable("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < nodes.size(); ++i)
    threads.emplace_back([&, i] { joined[i] = nodes[i]->client.Join(0); });
  for (std::thread& t : threads) t.join();

  for (size_t i = 0; i < nodes.size(); ++i) {
    REQUIRE_MESSAGE(joined[i].ok(), joined[i].status().message());
    const Topology& t = *joined[i];
    CHECK(t.server_num == servers);
    CHECK(t.worker_num == workers);
    std::set<std::pair<Role, int>> listed;
    for (const NodeInfo& n : t.nodes) {
      CHECK(n.host == "127.0.0.1");
      listed.insert({n.role, n.rank});
    }
    CHECK(listed.size() == t.nodes.size());  // each once
    const int rank = nodes[i]->client.rank();
    if (i < static_cast<size_t>(servers)) {
      CHECK(t.nodes.empty());
    } else {
      std::set<std::pair<Role, int>> want = {{Role::kServer, 0},
                                             {Role::kServer, 1},
                                             {Role::kWorker, (rank + 1) % workers},
                                             {Role::kWorker, (rank + workers - 1) % workers}};
      CHECK(listed == want);
    }
  }
  for (size_t i = servers; i < nodes.size(); ++i) CHECK(nodes[i]->client.ReportDone().ok());
  for (auto& n : nodes) CHECK(n->client.WaitForShutdown().ok());
  CHECK(scheduler.Wait().ok());
}

TEST_CASE(
    "peers: a worker talks to every server and its ring neighbours, a server to no one (or, "
    "replicated, to every other server)") {
  using P = PeerRank;
  CHECK(PeersOf(Role::kServer, 0, 3, 8).empty());
  CHECK(PeersOf(Role::kWorker, 0, 2, 4) ==
        std::vector<P>{
            {Role::kServer, 0}, {Role::kServer, 1}, {Role::kWorker, 1}, {Role::kWorker, 3}});
  // Two workers: the one neighbour is both next and previous.
  CHECK(PeersOf(Role::kWorker, 1, 0, 2) == std::vector<P>{{Role::kWorker, 0}});
  // One worker: no ring.
  CHECK(PeersOf(Role::kWorker, 0, 1, 1) == std::vector<P>{{Role::kServer, 0}});
  // Replicated (train.replication): a server talks to every other server.
  CHECK(PeersOf(Role::kServer, 1, 3, 8, 1) ==
        std::vector<P>{{Role::kServer, 0}, {Role::kServer, 2}});
  CHECK(PeersOf(Role::kWorker, 1, 0, 2, 1) == std::vector<P>{{Role::kWorker, 0}});
}

TEST_CASE("garbage on the scheduler port closes that connection only") {
  auto sink = std::make_shared<CaptureSink>();
  ClusterOptions cluster = Shape(1, 1);
  Scheduler scheduler(cluster, CaptureLogger("scheduler", sink));
  auto port = scheduler.Start();
  REQUIRE(port.ok());

  SendRaw(*port, std::vector<uint8_t>(64, 0xAB));  // wrong magic
  std::vector<uint8_t> bad_body(kFixedHeaderBytes + 16, 0x5A);
  EncodeFixedHeader(16, 0, bad_body.data());  // valid fixed header, junk FlatBuffer
  SendRaw(*port, bad_body);
  CHECK(sink->Matching("bad frame").size() == 2);

  std::thread server([&] {
    Server s(NodeFor(Role::kServer, cluster, *port), CaptureLogger("server", sink));
    CHECK(s.Run().ok());
  });
  Worker w(NodeFor(Role::kWorker, cluster, *port), CaptureLogger("worker", sink));
  CHECK(w.Run().ok());
  server.join();
  CHECK(scheduler.Wait().ok());
  CHECK(sink->Matching("Start the scheduler node is successful!").size() == 1);
}

TEST_CASE("a worker beyond MS_WORKER_NUM is refused with the reason") {
  auto sink = std::make_shared<CaptureSink>();
  ClusterOptions cluster = Shape(1, 2);
  Scheduler scheduler(cluster, CaptureLogger("scheduler", sink));
  auto port = scheduler.Start();
  REQUIRE(port.ok());

  // Two workers register and wait for the server, which is not there yet.
  std::vector<std::thread> workers;
  for (int i = 0; i < 2; ++i)
    workers.emplace_back([&] {
      Worker w(NodeFor(Role::kWorker, cluster, *port), CaptureLogger("worker", sink));
      CHECK(w.Run().ok());
    });
  REQUIRE(sink->WaitFor("The worker node id:", 2));

  Worker third(NodeFor(Role::kWorker, cluster, *port, "third"), CaptureLogger("third", sink));
  Status refused = third.Run();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.message().find("refused") != std::string::npos);
  CHECK(refused.message().find("MS_WORKER_NUM=2") != std::string::npos);
  CHECK(sink->Matching("refused worker node id:third").size() == 1);

  Server server(NodeFor(Role::kServer, cluster, *port), CaptureLogger("server", sink));
  CHECK(server.Run().ok());
  for (auto& t : workers) t.join();
  CHECK(scheduler.Wait().ok());
  CHECK(sink->Matching("assign rank id:").size() == 3);
}

TEST_CASE("a node whose token or shape differs is refused") {
  auto sink = std::make_shared<CaptureSink>();
  ClusterOptions cluster = Shape(0, 1);
  cluster.token = "s3cret";
  Scheduler scheduler(cluster, CaptureLogger("scheduler", sink));
  auto port = scheduler.Start();
  REQUIRE(port.ok());

  NodeOptions wrong_token = NodeFor(Role::kWorker, cluster, *port);
  wrong_token.cluster.token = "guess";
  TestNode a(wrong_token, CaptureLogger("a", sink));
  auto joined = a.client.Join(0);
  REQUIRE_FALSE(joined.ok());
  // Refused by the handshake, at once (no retrying until the connect
  // timeout), and the scheduler's log names the source and the check.
  CHECK(joined.status().code() == StatusCode::kPermissionDenied);
  CHECK(joined.status().message().find("proof does not match MS_CLUSTER_TOKEN") !=
        std::string::npos);
  CHECK(sink->WaitFor("authentication failed from 127.0.0.1:"));
  for (const std::string& line : sink->Matching("authentication failed from 127.0.0.1:"))
    CHECK(line.find("proof does not match MS_CLUSTER_TOKEN") != std::string::npos);

  NodeOptions wrong_shape = NodeFor(Role::kWorker, cluster, *port);
  wrong_shape.cluster.worker_num = 3;
  TestNode b(wrong_shape, CaptureLogger("b", sink));
  joined = b.client.Join(0);
  REQUIRE_FALSE(joined.ok());
  INFO(joined.status().message());
  CHECK(joined.status().message().find("MS_WORKER_NUM=3") != std::string::npos);

  Worker good(NodeFor(Role::kWorker, cluster, *port), CaptureLogger("good", sink));
  CHECK(good.Run().ok());
  CHECK(scheduler.Wait().ok());
}

TEST_CASE("a worker that cannot reach the scheduler gives up in the configured time") {
  // A port nobody listens on: bind one, note it, close it.
  ClusterOptions cluster = Shape(0, 1);
  cluster.connect_timeout_s = 0.5;
  uint16_t dead_port;
  {
    EventLoop loop;
    REQUIRE(loop.Start().ok());
    Listener listener(&loop, MakeLogger("probe"));
    auto port = loop.Call<StatusOr<uint16_t>>(
        [&] { return listener.Listen("127.0.0.1", 0, [](Connection::Ptr) {}); },
        Aborted("stopped"));
    REQUIRE(port.ok());
    dead_port = *port;
    REQUIRE(loop.Stop().ok());
  }
  auto sink = std::make_shared<CaptureSink>();
  Worker w(NodeFor(Role::kWorker, cluster, dead_port), CaptureLogger("worker", sink));
  auto start = std::chrono::steady_clock::now();
  Status st = w.Run();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("cannot reach the scheduler at 127.0.0.1:" + std::to_string(dead_port)) !=
        std::string::npos);
  CHECK(s >= 0.5);
  CHECK(s < 10);
}

TEST_CASE("a node that registers again with its node id keeps its rank") {
  auto sink = std::make_shared<CaptureSink>();
  ClusterOptions cluster = Shape(0, 2);
  Scheduler scheduler(cluster, CaptureLogger("scheduler", sink));
  auto port = scheduler.Start();
  REQUIRE(port.ok());

  NodeOptions a_options = NodeFor(Role::kWorker, cluster, *port, "worker-a");
  StatusOr<Topology> first_join = Unavailable("not run");
  auto first = std::make_unique<TestNode>(a_options, CaptureLogger("a", sink));
  std::thread first_thread([&] { first_join = first->client.Join(0); });
  REQUIRE(sink->WaitFor("node id:worker-a,node ip: 127.0.0.1,node port:0 assign rank id:0"));
  REQUIRE(first->loop.Stop().ok());  // the process "dies"
  first_thread.join();
  CHECK_FALSE(first_join.ok());

  TestNode again(a_options, CaptureLogger("a2", sink));
  std::thread other([&] {
    Worker w(NodeFor(Role::kWorker, cluster, *port, "worker-b"), CaptureLogger("b", sink));
    CHECK(w.Run().ok());
  });
  auto topology = again.client.Join(0);
  REQUIRE(topology.ok());
  CHECK(again.client.rank() == 0);
  CHECK(sink->Matching("node id:worker-a,node ip: 127.0.0.1,node port:0 registered again, keeps "
                       "rank id:0")
            .size() == 1);
  CHECK(sink->Matching("node id:worker-b").size() >= 1);
  FinishJob(again, other, scheduler);
}

TEST_CASE("a register request naming a live node's id is refused, and that node keeps its rank") {
  auto sink = std::make_shared<CaptureSink>();
  ClusterOptions cluster = Shape(0, 2);
  Scheduler scheduler(cluster, CaptureLogger("scheduler", sink));
  auto port = scheduler.Start();
  REQUIRE(port.ok());

  NodeOptions a_options = NodeFor(Role::kWorker, cluster, *port, "worker-a");
  TestNode holder(a_options, CaptureLogger("a", sink));
  StatusOr<Topology> holder_join = Unavailable("not run");
  std::thread holder_thread([&] { holder_join = holder.client.Join(0); });
  REQUIRE(sink->WaitFor("node id:worker-a,node ip: 127.0.0.1,node port:0 assign rank id:0"));

  // A second process claims the id (a copy-pasted MS_NODE_ID, or a stranger).
  NodeOptions impostor_options = a_options;
  impostor_options.node_port = 4242;
  TestNode impostor(impostor_options, CaptureLogger("impostor", sink));
  auto refused = impostor.client.Join(4242);
  REQUIRE_FALSE(refused.ok());
  INFO(refused.status().message());
  CHECK(refused.status().message().find(
            "node id worker-a is held by a live node (worker rank 0 at 127.0.0.1:0)") !=
        std::string::npos);

  std::thread other([&] {
    Worker w(NodeFor(Role::kWorker, cluster, *port, "worker-b"), CaptureLogger("b", sink));
    CHECK(w.Run().ok());
  });
  holder_thread.join();
  REQUIRE(holder_join.ok());
  for (const NodeInfo& n : holder_join->nodes)
    if (n.node_id == "worker-a") CHECK(n.port == 0);  // not the impostor's address
  FinishJob(holder, other, scheduler);
  CHECK(sink->Matching("lost").empty());
}

TEST_CASE("a restarted node whose old connection lingers unanswering gets its rank back") {
  auto sink = std::make_shared<CaptureSink>();
  ClusterOptions cluster = Shape(0, 2);
  cluster.heartbeat_interval_s = 0.1;
  cluster.heartbeat_timeout_s = 0.6;
  Scheduler scheduler(cluster, CaptureLogger("scheduler", sink));
  auto port = scheduler.Start();
  REQUIRE(port.ok());

  // The old process: registered, then frozen (it answers nothing).
  EventLoop frozen_loop;
  REQUIRE(frozen_loop.Start().ok());
  Completion<StatusOr<Incoming>> registered;
  frozen_loop.Post([&] {
    Connection::Connect(&frozen_loop, CaptureLogger("frozen", sink), "127.0.0.1", *port,
                        [&](StatusOr<Connection::Ptr> c) {
                          if (!c.ok()) return registered.Set(c.status());
                          (*c)->Start(nullptr, nullptr);
                          RegisterRequest req;
                          req.node = NodeInfo{"worker-a", Role::kWorker, "127.0.0.1", 0, -1};
                          req.worker_num = 2;
                          (*c)->Call(req, [&](StatusOr<Incoming> r) { registered.Set(r); });
                        });
  });
  REQUIRE(registered.Wait().ok());

  NodeOptions again_options = NodeFor(Role::kWorker, cluster, *port, "worker-a");
  TestNode again(again_options, CaptureLogger("a2", sink));
  std::thread other([&] {
    // Only once the newcomer holds the rank: with both ranks held the job
    // would start, and the frozen holder end it.
    REQUIRE(sink->WaitFor("registered again, keeps rank id:0"));
    Worker w(NodeFor(Role::kWorker, cluster, *port, "worker-b"), CaptureLogger("b", sink));
    CHECK(w.Run().ok());
  });
  auto topology = again.client.Join(0);
  REQUIRE_MESSAGE(topology.ok(), topology.status().message());
  CHECK(again.client.rank() == 0);
  CHECK(sink->Matching("asking the holder whether it is alive").size() == 1);
  CHECK(sink->Matching("registered again, keeps rank id:0").size() == 1);
  FinishJob(again, other, scheduler);
  CHECK(frozen_loop.Stop().ok());
}

TEST_CASE("a barrier holds each member until all have entered") {
  auto sink = std::make_shared<CaptureSink>();
  ClusterOptions cluster = Shape(1, 2);
  Scheduler scheduler(cluster, CaptureLogger("scheduler", sink));
  auto port = scheduler.Start();
  REQUIRE(port.ok());
  TestNode server(NodeFor(Role::kServer, cluster, *port), CaptureLogger("s", sink));
  TestNode w0(NodeFor(Role::kWorker, cluster, *port), CaptureLogger("w0", sink));
  TestNode w1(NodeFor(Role::kWorker, cluster, *port), CaptureLogger("w1", sink));
  std::thread joins[] = {std::thread([&] { CHECK(server.client.Join(0).ok()); }),
                         std::thread([&] { CHECK(w1.client.Join(0).ok()); })};
  REQUIRE(w0.client.Join(0).ok());
  for (auto& t : joins) t.join();

  std::atomic<bool> w1_entered{false};
  std::thread first([&] {
    CHECK(w0.client.Barrier(BarrierGroup::kWorkers).ok());
    CHECK(w1_entered.load());  // released only after the other worker came
  });
  REQUIRE(sink->WaitFor("entered the barrier of workers (1 of 2)"));
  w1_entered = true;
  CHECK(w1.client.Barrier(BarrierGroup::kWorkers).ok());
  first.join();

  // A barrier can also agree on the smallest of the members' values.
  StatusOr<int64_t> agreed0 = Unavailable("not run");
  std::thread agree([&] { agreed0 = w0.client.AgreeMin(BarrierGroup::kWorkers, 5); });
  auto agreed1 = w1.client.AgreeMin(BarrierGroup::kWorkers, 3);
  agree.join();
  REQUIRE(agreed0.ok());
  REQUIRE(agreed1.ok());
  CHECK(*agreed0 == 3);
  CHECK(*agreed1 == 3);

  // ... or hand every member the bytes one of them gave (binary is fine).
  const std::string id("nccl\0id\xff", 9);
  StatusOr<std::string> shared1 = Unavailable("not run");
  std::thread share([&] { shared1 = w1.client.ShareFromOne(BarrierGroup::kWorkers, ""); });
  auto shared0 = w0.client.ShareFromOne(BarrierGroup::kWorkers, id);
  share.join();
  REQUIRE(shared0.ok());
  REQUIRE(shared1.ok());
  CHECK(*shared0 == id);
  CHECK(*shared1 == id);

  // A server is not a member of the workers' barrier.
  Status not_member = server.client.Barrier(BarrierGroup::kWorkers);
  REQUIRE_FALSE(not_member.ok());
  CHECK(not_member.message().find("not a member") != std::string::npos);
  CHECK(server.client.Barrier(BarrierGroup::kServers).ok());  // a group of one

  for (TestNode* w : {&w0, &w1}) CHECK(w->client.ReportDone().ok());
  for (TestNode* n : {&server, &w0, &w1}) CHECK(n->client.WaitForShutdown().ok());
  CHECK(scheduler.Wait().ok());
}

TEST_CASE("a silent node is logged with its id, role and rank, and ends the job") {
  auto sink = std::make_shared<CaptureSink>();
  ClusterOptions cluster = Shape(0, 1);
  cluster.heartbeat_interval_s = 0.05;
  cluster.heartbeat_timeout_s = 0.3;
  Scheduler scheduler(cluster, CaptureLogger("scheduler", sink));
  auto port = scheduler.Start();
  REQUIRE(port.ok());
  NodeOptions quiet = NodeFor(Role::kWorker, cluster, *port, "quiet");
  quiet.cluster.heartbeat_interval_s = 3600;  // as good as silent
  quiet.cluster.heartbeat_timeout_s = 7200;
  quiet.cluster.connect_timeout_s = 0.5;
  TestNode node(quiet, CaptureLogger("quiet", sink));
  REQUIRE(node.client.Join(0).ok());
  // The scheduler drops it; it tries to rejoin, but the job is over.
  Status lost = node.client.WaitForShutdown();
  REQUIRE_FALSE(lost.ok());
  CHECK(lost.message().find("cannot reach the scheduler") != std::string::npos);
  Status aborted = scheduler.Wait();
  CHECK(aborted.code() == StatusCode::kAborted);
  CHECK(aborted.message().find("lost the worker rank 0 (node id quiet)") != std::string::npos);
  CHECK(sink->Matching("lost the worker node id:quiet (rank 0, 127.0.0.1:0): it has sent no "
                       "heartbeat")
            .size() >= 1);
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

TEST_CASE("a restarted scheduler is rejoined by the running nodes, which keep their ranks") {
  auto sink = std::make_shared<CaptureSink>();
  ClusterOptions cluster = Shape(1, 2);
  auto first = std::make_unique<Scheduler>(cluster, CaptureLogger("scheduler", sink));
  auto port = first->Start();
  REQUIRE(port.ok());
  TestNode server(NodeFor(Role::kServer, cluster, *port, "s"), CaptureLogger("s", sink));
  TestNode w0(NodeFor(Role::kWorker, cluster, *port, "w0"), CaptureLogger("w0", sink));
  TestNode w1(NodeFor(Role::kWorker, cluster, *port, "w1"), CaptureLogger("w1", sink));
  std::thread joining([&] { CHECK(server.client.Join(0).ok()); });
  std::thread joining0([&] { CHECK(w0.client.Join(0).ok()); });
  REQUIRE(w1.client.Join(0).ok());
  joining.join();
  joining0.join();
  // The worker that finishes while no scheduler runs reports Done again.
  std::thread done0([&] { CHECK(w0.client.ReportDone().ok()); });
  REQUIRE(sink->WaitFor("finished its work"));

  first.reset();  // the scheduler dies; the nodes keep running
  REQUIRE(sink->WaitFor("trying to rejoin it"));
  ClusterOptions again = cluster;
  again.sched_port = *port;
  Scheduler second(again, CaptureLogger("scheduler", sink));
  REQUIRE(second.Start().ok());
  REQUIRE(sink->WaitFor("Start the scheduler node is successful!", 2));
  REQUIRE(sink->WaitFor("re-joined the restarted scheduler", 3));
  CHECK(
      sink->Matching("node id:w1,node ip: 127.0.0.1,node port:0 rejoined, keeps rank id:").size() ==
      1);
  CHECK(w1.client.ReportDone().ok());
  done0.join();
  for (TestNode* n : {&server, &w0, &w1}) CHECK(n->client.WaitForShutdown().ok());
  CHECK(second.Wait().ok());
  CHECK(w0.client.rank() != w1.client.rank());
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

// Whether a TCP connection to ip:port is accepted.
bool CanConnect(const char* ip, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  REQUIRE(inet_pton(AF_INET, ip, &addr.sin_addr) == 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

TEST_CASE("a node port listens on the address it advertises, not on every interface") {
  auto sink = std::make_shared<CaptureSink>();
  ClusterOptions cluster = Shape(1, 1);
  Scheduler scheduler(cluster, CaptureLogger("scheduler", sink));
  auto port = scheduler.Start();
  REQUIRE(port.ok());
  std::thread server([&] {
    Server s(NodeFor(Role::kServer, cluster, *port, "srv"), CaptureLogger("server", sink));
    CHECK(s.Run().ok());
  });
  REQUIRE(sink->WaitFor("The server node id:srv,"));
  const std::string line = sink->Matching("The server node id:srv,")[0];
  const size_t at = line.find("node port:") + std::strlen("node port:");
  const auto node_port = static_cast<uint16_t>(std::stoi(line.substr(at)));
  // Reached from the scheduler over 127.0.0.1, it listens there only: another
  // loopback address (all of 127/8 is this host) finds no listener.
  CHECK(CanConnect("127.0.0.1", node_port));
  CHECK_FALSE(CanConnect("127.0.0.2", node_port));
  Worker w(NodeFor(Role::kWorker, cluster, *port), CaptureLogger("worker", sink));
  CHECK(w.Run().ok());
  server.join();
  CHECK(scheduler.Wait().ok());
}

}  // namespace
}  // namespace pstrain
