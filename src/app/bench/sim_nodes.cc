#include "src/app/bench/sim_nodes.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "comm/transport/connection.h"
#include "comm/transport/event_loop.h"
#include "comm/transport/security.h"
#include "comm/transport/timer.h"
#include "src/app/bench/clock.h"
#include "src/common/logging.h"
#include "src/common/mutex.h"

namespace pstrain {
namespace {

enum Counter { kRegistered, kTopology, kBarrier, kPaused, kRecovered, kShutdown, kCounters };
constexpr uint64_t kRetryMs = 100;
constexpr uint64_t kHeartbeatMs = 1000;

}  // namespace

// What every loop reports to the caller's thread.
struct SimNodes::Shared {
  explicit Shared(int nodes) : nodes(nodes) {}
  const int nodes;
  std::atomic<bool> stopping{false};
  Mutex mutex;
  CondVar changed;
  int count[kCounters] GUARDED_BY(mutex) = {};
  BenchClock::time_point last[kCounters] GUARDED_BY(mutex);
  Status failed GUARDED_BY(mutex);
  JoinFigures join GUARDED_BY(mutex);
  RecoveryFigures recovery GUARDED_BY(mutex);

  void Count(Counter c) {
    MutexLock lock(&mutex);
    last[c] = BenchClock::now();
    if (++count[c] >= nodes - 1) changed.NotifyAll();  // what Wait() waits for
  }
  void Fail(const Status& why) {
    if (stopping.load()) return;
    MutexLock lock(&mutex);
    if (failed.ok()) failed = why;
    changed.NotifyAll();
  }
  // Until `need` nodes (every node: -1) have counted `c`, one failed, or
  // `timeout_s` passed. An error says how far the nodes got.
  Status Wait(Counter c, const std::string& what, double timeout_s, int need = -1) {
    const auto start = BenchClock::now();
    if (need < 0) need = nodes;
    MutexLock lock(&mutex);
    const bool done = changed.WaitFor(
        &lock, std::chrono::duration<double>(timeout_s),
        [this, c, need]() REQUIRES(mutex) { return count[c] >= need || !failed.ok(); });
    if (done && failed.ok()) return Status::OK();
    const std::string reached = fmt::format(
        "{} of {} nodes after {:.2f} s; {} registered, the last {:.2f} s after the phase began",
        count[c], need, SecondsSince(start), count[kRegistered],
        std::chrono::duration<double>(last[kRegistered] - start).count());
    if (!failed.ok()) return failed.WithContext(fmt::format("{} ({})", what, reached));
    return DeadlineExceeded(fmt::format("{}: {}", what, reached));
  }
  double SecondsTo(Counter c, BenchClock::time_point since) {
    MutexLock lock(&mutex);
    return std::chrono::duration<double>(last[c] - since).count();
  }
};

// The nodes of one loop. Everything but the constructor runs on the loop.
struct SimNodes::Shard {
  struct Node {
    Role role;
    std::string id;
    Connection::Ptr conn;
    std::string local_ip;  // connects from
    bool topology = false;
    bool recovering = false;  // Recover(): until its Topology of the next generation
    bool shut_down = false;
  };

  Shard(const SimShape& shape, std::shared_ptr<Shared> shared, int window)
      : shape(shape), shared(std::move(shared)), window(window), log(MakeLogger("sim")) {
    log->set_level(spdlog::level::err);  // thousands of nodes: failures go to the caller
    loop.SetSecurity(SecurityFrom(shape.limits));
  }

  static std::string Name(const Node& n) {
    return fmt::format("{} node {}", RoleName(n.role), n.id);
  }

  void Pump() {
    while (in_flight < window && next < nodes.size()) {
      ++in_flight;
      Connect(&nodes[next++]);
    }
  }

  void Connect(Node* n) {
    auto connected = [this, n](StatusOr<Connection::Ptr> c) {
      if (shared->stopping.load()) {
        if (c.ok()) (*c)->Close(Aborted("the bench is stopping"));
        return;
      }
      if (!c.ok()) {
        // A full accept queue or a refused handshake: try again, as a node does.
        ++retries;
        return RunAfter(&loop, kRetryMs, [this, n](bool fired) {
          if (fired) Connect(n);
        });
      }
      n->conn = *c;
      n->conn->Start(
          [this, n](const Connection::Ptr& conn, Incoming&& in) { OnMessage(n, conn, in); },
          [this, n](const Connection::Ptr& conn, const Status& why) {
            // A connection this node left (Recover) is no longer its own.
            if (conn == n->conn && !n->shut_down)
              shared->Fail(Unavailable(fmt::format("{} lost its connection to the scheduler: {}",
                                                   Name(*n), why.message())));
          });
      Register(n);
    };
    Connection::Connect(&loop, log, shape.host, shape.port, connected, n->local_ip);
  }

  void Register(Node* n) {
    RegisterRequest req;
    req.node.node_id = n->id;
    req.node.role = n->role;
    req.node.host = "127.0.0.1";
    req.node.port = static_cast<uint16_t>(1024 + (n - nodes.data()) % 60000);  // never dialed
    req.server_num = shape.servers;
    req.worker_num = shape.workers;
    req.recovery_wait_s = shape.recovery_wait_s;
    n->conn->Call(req, [this, n](StatusOr<Incoming> reply) {
      --in_flight;
      Pump();
      if (!reply.ok()) return shared->Fail(reply.status().WithContext(Name(*n) + " registering"));
      if (!std::holds_alternative<RegisterReply>(reply->message.body))
        return shared->Fail(Internal(fmt::format("{}: RegisterRequest answered with {}", Name(*n),
                                                 MessageName(reply->message.body))));
      shared->Count(kRegistered);
    });
  }

  void OnMessage(Node* n, const Connection::Ptr& conn, const Incoming& in) {
    const uint64_t id = in.message.request_id;
    const MessageBody& body = in.message.body;
    if (std::holds_alternative<Heartbeat>(body)) {
      if (id != 0) conn->Reply(id, Ack{});  // a probe
    } else if (auto* topology = std::get_if<Topology>(&body)) {
      conn->Reply(id, Ack{});
      if (n->recovering && topology->generation > 0) {
        n->recovering = false;
        {
          MutexLock lock(&shared->mutex);
          RecoveryFigures& r = shared->recovery;
          r.topology_bytes += in.wire_bytes;
          r.topology_entries += topology->nodes.size();
          r.topology_max_entries =
              std::max<uint64_t>(r.topology_max_entries, topology->nodes.size());
        }
        return shared->Count(kRecovered);
      }
      if (n->topology) return;
      n->topology = true;
      const uint64_t bytes = in.wire_bytes;
      {
        MutexLock lock(&shared->mutex);
        JoinFigures& j = shared->join;
        j.topology_bytes += bytes;
        j.topology_entries += topology->nodes.size();
        j.topology_max_entries = std::max<uint64_t>(j.topology_max_entries, topology->nodes.size());
      }
      shared->Count(kTopology);
    } else if (auto* shutdown = std::get_if<Shutdown>(&body)) {
      n->shut_down = true;
      conn->Reply(id, Ack{});
      if (shutdown->failed)
        return shared->Fail(Aborted("the scheduler ended the job: " + shutdown->reason));
      shared->Count(kShutdown);
    } else if (auto* pause = std::get_if<Pause>(&body)) {
      conn->Reply(id, Ack{});
      if (shape.recovery_wait_s <= 0)
        return shared->Fail(
            Aborted(fmt::format("the scheduler paused the job: {}", pause->reason)));
      // Rolled back: a new connection, registered again with its node id.
      n->recovering = true;
      Leave(n, "rolling back");
      ++in_flight;
      Connect(n);
      shared->Count(kPaused);
    } else {
      conn->Reply(
          id, ErrorReply{fmt::format("a simulated node does not handle {}", MessageName(body))});
    }
  }

  // Closes the node's connection on purpose.
  void Leave(Node* n, const char* why) {
    Connection::Ptr old = std::move(n->conn);
    n->conn = nullptr;
    if (old) old->Close(Aborted(why));
  }

  // Throughout, as a real node does.
  void SendHeartbeats() {
    for (Node& n : nodes)
      if (n.conn && !n.conn->closed()) n.conn->Notify(Heartbeat{});
  }

  void Beat() {
    for (Node& n : nodes) {
      for (int k = 0; k < shape.heartbeats; ++k) n.conn->Notify(Heartbeat{});
      n.conn->Call(BarrierRequest{BarrierGroup::kAll, 0, ""}, [this, &n](StatusOr<Incoming> reply) {
        if (!reply.ok())
          return shared->Fail(reply.status().WithContext(Name(n) + " in the barrier"));
        shared->Count(kBarrier);
      });
    }
  }

  void ReportDone() {
    for (Node& n : nodes) {
      if (n.role != Role::kWorker) continue;
      n.conn->Call(Done{}, [this, &n](StatusOr<Incoming> reply) {
        if (!reply.ok()) shared->Fail(reply.status().WithContext(Name(n) + " reporting Done"));
      });
    }
  }

  const SimShape& shape;
  std::shared_ptr<Shared> shared;
  const int window;
  Logger log;
  EventLoop loop;
  Timer heartbeat{&loop};
  std::vector<Node> nodes;  // never resized once the loop runs: callbacks hold Node*
  size_t next = 0;
  int in_flight = 0;
  int64_t retries = 0;
};

SimNodes::SimNodes(SimShape shape)
    : shape_(std::move(shape)), shared_(std::make_shared<Shared>(nodes())) {
  const int loops = std::clamp(shape_.loops, 1, std::max(nodes(), 1));
  for (int l = 0; l < loops; ++l)
    shards_.push_back(std::make_unique<Shard>(shape_, shared_, std::max(1, shape_.window / loops)));
  // Servers first, as ranks go; node i on loop i % loops.
  for (int i = 0; i < nodes(); ++i) {
    const bool server = i < shape_.servers;
    shards_[i % loops]->nodes.push_back(
        {server ? Role::kServer : Role::kWorker,
         fmt::format("sim-{}{}", server ? "s" : "w", server ? i : i - shape_.servers), nullptr,
         fmt::format("127.0.0.{}", 2 + i % std::max(shape_.local_ips, 1))});
  }
}

SimNodes::~SimNodes() {
  shared_->stopping = true;
  for (auto& shard : shards_) shard->loop.Stop().IgnoreError();
}

Status SimNodes::Start() {
  for (auto& shard : shards_) {
    PSTRAIN_RETURN_IF_ERROR(shard->loop.Start());
    Shard* s = shard.get();
    s->loop.Post([s] { s->heartbeat.RunEvery(kHeartbeatMs, [s] { s->SendHeartbeats(); }); });
  }
  return Status::OK();
}

StatusOr<JoinFigures> SimNodes::Join(double timeout_s) {
  const auto start = BenchClock::now();
  for (auto& shard : shards_) {
    Shard* s = shard.get();
    s->loop.Post([s] { s->Pump(); });
  }
  PSTRAIN_RETURN_IF_ERROR(shared_->Wait(kTopology, "every node's topology", timeout_s));
  JoinFigures figures;
  {
    MutexLock lock(&shared_->mutex);
    figures = shared_->join;
  }
  figures.registered_s = shared_->SecondsTo(kRegistered, start);
  figures.topology_s = shared_->SecondsTo(kTopology, start);
  for (auto& shard : shards_) {
    Shard* s = shard.get();
    figures.connect_retries += s->loop.Call<int64_t>([s] { return s->retries; }, 0);
  }
  return figures;
}

StatusOr<double> SimNodes::Beat(double timeout_s) {
  const auto start = BenchClock::now();
  for (auto& shard : shards_) {
    Shard* s = shard.get();
    s->loop.Post([s] { s->Beat(); });
  }
  PSTRAIN_RETURN_IF_ERROR(shared_->Wait(kBarrier, "heartbeats and a barrier", timeout_s));
  return shared_->SecondsTo(kBarrier, start);
}

StatusOr<RecoveryFigures> SimNodes::Recover(double timeout_s) {
  if (shape_.recovery_wait_s <= 0 || shape_.workers < 1)
    return FailedPrecondition("a recovery needs a worker and a recovery wait");
  // Node i is nodes[i / loops] of shard i % loops; the last is a worker.
  const int last = nodes() - 1;
  Shard* s = shards_[last % shards_.size()].get();
  Shard::Node* victim = &s->nodes[last / shards_.size()];
  const auto start = BenchClock::now();
  s->loop.Post([s, victim] {
    victim->recovering = true;
    s->Leave(victim, "the bench ends this node's process");
  });
  PSTRAIN_RETURN_IF_ERROR(shared_->Wait(kPaused, "the pause", timeout_s, nodes() - 1));
  // The replacement: another node id for the free rank, once it is free.
  s->loop.Post([s, victim] {
    victim->id += "-new";
    ++s->in_flight;
    s->Connect(victim);
  });
  PSTRAIN_RETURN_IF_ERROR(
      shared_->Wait(kRecovered, "every node's topology after the recovery", timeout_s));
  RecoveryFigures figures;
  {
    MutexLock lock(&shared_->mutex);
    figures = shared_->recovery;
  }
  figures.topology_s = shared_->SecondsTo(kRecovered, start);
  return figures;
}

StatusOr<double> SimNodes::Finish(double timeout_s) {
  const auto start = BenchClock::now();
  for (auto& shard : shards_) {
    Shard* s = shard.get();
    s->loop.Post([s] { s->ReportDone(); });
  }
  PSTRAIN_RETURN_IF_ERROR(shared_->Wait(kShutdown, "the shutdown", timeout_s));
  return shared_->SecondsTo(kShutdown, start);
}

}  // namespace pstrain
