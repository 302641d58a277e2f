#include "roles/scheduler.h"

#include <fmt/format.h>

#include <algorithm>

namespace pstrain {
namespace {

uint64_t Millis(double seconds) { return static_cast<uint64_t>(seconds * 1000.0 + 0.5); }

}  // namespace

Scheduler::Scheduler(ClusterOptions options, Logger log)
    : options_(std::move(options)), log_(std::move(log)), listener_(&loop_, log_) {}

Scheduler::~Scheduler() {
  const Status stopped = loop_.Stop();
  if (!stopped.ok()) log_->error("stopping the scheduler: {}", stopped.message());
}

StatusOr<uint16_t> Scheduler::Start() {
  PSTRAIN_RETURN_IF_ERROR(loop_.Start());
  return loop_.Call<StatusOr<uint16_t>>(
      [this]() -> StatusOr<uint16_t> {
        auto port = listener_.Listen(options_.sched_host, options_.sched_port,
                                     [this](Connection::Ptr c) { OnAccept(std::move(c)); });
        if (!port.ok()) return port.status();
        heartbeat_timer_.RunEvery(Millis(options_.heartbeat_interval_s),
                                  [this] { CheckHeartbeats(); });
        log_->info("The scheduler listens on {}:{} for {} servers and {} workers",
                   options_.sched_host, *port, options_.server_num, options_.worker_num);
        return *port;
      },
      Aborted("scheduler stopped while starting"));
}

Status Scheduler::Wait() {
  Status status = finished_.Wait();
  Status stopped = loop_.Stop();
  return status.ok() ? stopped : status;
}

void Scheduler::Abort(const std::string& reason) {
  loop_.Post([this, reason] { AbortOnLoop(Aborted(reason)); });
}

void Scheduler::AbortOnLoop(const Status& why) {
  if (finished_.IsSet()) return;
  log_->error("aborting the job: {}", why.message());
  shutting_down_ = true;
  for (auto* nodes : {&servers_, &workers_})
    for (NodeEntry& n : *nodes)
      if (auto conn = n.conn.lock()) conn->Close(why);
  Finish(why);
}

void Scheduler::OnAccept(Connection::Ptr conn) {
  conn->Start([this](const Connection::Ptr& c, Incoming&& in) { OnRequest(c, std::move(in)); },
              [this](const Connection::Ptr& c, const Status& why) { OnClose(c, why); });
}

void Scheduler::OnRequest(const Connection::Ptr& conn, Incoming&& in) {
  const uint64_t id = in.message.request_id;
  if (auto* reg = std::get_if<RegisterRequest>(&in.message.body)) {
    HandleRegister(conn, id, *reg);
    return;
  }
  NodeEntry* node = FindByConnection(conn.get());
  if (node == nullptr) {
    conn->Reply(id, ErrorReply{fmt::format("{} from an unregistered connection: register first",
                                           MessageName(in.message.body))});
    return;
  }
  node->last_heard_ms = loop_.NowMs();
  if (std::holds_alternative<Heartbeat>(in.message.body)) return;
  if (auto* barrier = std::get_if<BarrierRequest>(&in.message.body)) {
    HandleBarrier(conn, id, *node, *barrier);
  } else if (std::holds_alternative<Done>(in.message.body)) {
    HandleDone(conn, id, *node);
  } else {
    conn->Reply(id, ErrorReply{fmt::format("the scheduler does not handle {}",
                                           MessageName(in.message.body))});
  }
}

Status Scheduler::CheckRegistration(const RegisterRequest& req) const {
  if (!options_.token.empty() && req.token != options_.token)
    return InvalidArgument("MS_CLUSTER_TOKEN does not match the scheduler's");
  if (req.node.role == Role::kScheduler)
    return InvalidArgument("a scheduler cannot register with another scheduler");
  if (req.server_num != options_.server_num || req.worker_num != options_.worker_num)
    return InvalidArgument(fmt::format(
        "node was started with MS_SERVER_NUM={} MS_WORKER_NUM={} but the scheduler with "
        "MS_SERVER_NUM={} MS_WORKER_NUM={}",
        req.server_num, req.worker_num, options_.server_num, options_.worker_num));
  if (shutting_down_) return FailedPrecondition("the job is shutting down");
  return Status::OK();
}

void Scheduler::HandleRegister(const Connection::Ptr& conn, uint64_t id,
                               const RegisterRequest& req) {
  NodeInfo info = req.node;
  if (info.host.empty()) info.host = conn->peer().substr(0, conn->peer().rfind(':'));
  const char* role = RoleName(info.role);
  auto refuse = [&](const Status& why) {
    log_->warn("refused {} node id:{} from {}: {}", role, info.node_id, conn->peer(),
               why.message());
    conn->Reply(id, ErrorReply{why.message()});
  };
  if (Status st = CheckRegistration(req); !st.ok()) return refuse(st);
  // One connection is one node: a second identity on it would hold a slot
  // that no heartbeat, barrier or Done could ever fill.
  if (auto it = node_of_.find(conn.get()); it != node_of_.end() && it->second != info.node_id)
    return refuse(InvalidArgument(
        fmt::format("this connection is already registered as node id {}", it->second)));

  if (auto it = rank_of_.find(info.node_id); it != rank_of_.end()) {
    // 2a. A node we know again (restarted with the same MS_NODE_ID).
    auto [known_role, rank] = it->second;
    if (known_role != info.role)
      return refuse(InvalidArgument(fmt::format("node id {} is already registered as a {}",
                                                info.node_id, RoleName(known_role))));
    NodeEntry& node = NodesOf(info.role)[rank];
    if (auto old = node.conn.lock(); old && old != conn) {
      node_of_.erase(old.get());
      old->Close(Aborted("replaced by a new registration of the same node id"));
    }
    info.rank = rank;
    node.info = info;
    node.conn = conn;
    node.last_heard_ms = loop_.NowMs();
    node.silent = false;
    node_of_[conn.get()] = info.node_id;
    log_->info("The {} node id:{},node ip: {},node port:{} registered again, keeps rank id:{}",
               role, info.node_id, info.host, info.port, rank);
    conn->Reply(id, RegisterReply{rank});
    if (topology_sent_) SendTopology();
    return;
  }

  // 2b. A new node.
  std::vector<NodeEntry>& nodes = NodesOf(info.role);
  int limit = info.role == Role::kServer ? options_.server_num : options_.worker_num;
  if (static_cast<int>(nodes.size()) >= limit)
    return refuse(FailedPrecondition(fmt::format(
        "the job has {}={} and all {} {}s are registered",
        info.role == Role::kServer ? "MS_SERVER_NUM" : "MS_WORKER_NUM", limit, limit, role)));
  info.rank = static_cast<int>(nodes.size());
  nodes.push_back(NodeEntry{info, conn, loop_.NowMs()});
  rank_of_[info.node_id] = {info.role, info.rank};
  node_of_[conn.get()] = info.node_id;
  log_->info("The {} node id:{},node ip: {},node port:{} assign rank id:{}", role, info.node_id,
             info.host, info.port, info.rank);
  conn->Reply(id, RegisterReply{info.rank});

  // 3. Everyone is in: wire the topology.
  if (!topology_sent_ && AllRegistered()) {
    SendTopology();
    topology_sent_ = true;
    log_->info("Start the scheduler node is successful!");
  }
}

void Scheduler::SendTopology() {
  Topology topology;
  for (const auto* nodes : {&servers_, &workers_})
    for (const NodeEntry& n : *nodes) topology.nodes.push_back(n.info);
  for (const auto* nodes : {&servers_, &workers_}) {
    for (const NodeEntry& n : *nodes) {
      auto conn = n.conn.lock();
      if (!conn) continue;
      std::string who = Describe(n);
      conn->Call(topology, [this, who](StatusOr<Incoming> reply) {
        if (!reply.ok())
          log_->warn("sending the topology to {} failed: {}", who, reply.status().message());
      });
    }
  }
}

void Scheduler::HandleBarrier(const Connection::Ptr& conn, uint64_t id, NodeEntry& node,
                              const BarrierRequest& request) {
  const BarrierGroup group = request.group;
  bool member = group == BarrierGroup::kAll ||
                (group == BarrierGroup::kServers && node.info.role == Role::kServer) ||
                (group == BarrierGroup::kWorkers && node.info.role == Role::kWorker);
  if (!member || !topology_sent_) {
    conn->Reply(
        id, ErrorReply{fmt::format("{} cannot enter the barrier of {}: {}", Describe(node),
                                   BarrierGroupName(group),
                                   member ? "not every node has registered yet" : "not a member")});
    return;
  }
  auto& waiters = barriers_[static_cast<size_t>(group)];
  // A node that asks again (it reconnected) replaces its earlier request.
  for (auto it = waiters.begin(); it != waiters.end();)
    it = it->node_id == node.info.node_id ? waiters.erase(it) : it + 1;
  waiters.push_back({conn, id, node.info.node_id, node.info.rank, request.value, request.blob});
  log_->debug("{} entered the barrier of {} ({} of {})", Describe(node), BarrierGroupName(group),
              waiters.size(), GroupSize(group));
  if (waiters.size() < GroupSize(group)) return;
  BarrierReply reply{waiters[0].value, ""};
  const BarrierWaiter* shared = nullptr;  // the lowest-ranked non-empty blob
  for (const BarrierWaiter& w : waiters) {
    reply.min_value = std::min(reply.min_value, w.value);
    if (!w.blob.empty() && (shared == nullptr || w.rank < shared->rank)) shared = &w;
  }
  if (shared != nullptr) reply.blob = shared->blob;
  for (const BarrierWaiter& w : waiters)
    if (auto c = w.conn.lock()) c->Reply(w.request_id, reply);
  waiters.clear();
}

void Scheduler::HandleDone(const Connection::Ptr& conn, uint64_t id, NodeEntry& node) {
  if (node.info.role != Role::kWorker) {
    conn->Reply(id, ErrorReply{"only workers report Done"});
    return;
  }
  conn->Reply(id, Ack{});
  if (node.done) return;
  node.done = true;
  log_->info("{} finished its work", Describe(node));
  for (const NodeEntry& w : workers_)
    if (!w.done) return;
  if (static_cast<int>(workers_.size()) == options_.worker_num) BeginShutdown();
}

// 6. Every worker is done: tell every node to stop.
void Scheduler::BeginShutdown() {
  if (shutting_down_) return;
  shutting_down_ = true;
  log_->info("all {} workers finished; stopping {} servers and {} workers", workers_.size(),
             servers_.size(), workers_.size());
  for (auto* nodes : {&servers_, &workers_}) {
    for (NodeEntry& n : *nodes) {
      auto conn = n.conn.lock();
      if (!conn || conn->closed()) {
        n.shut_down = true;
        continue;
      }
      std::string node_id = n.info.node_id;
      conn->Call(Shutdown{"all workers finished"}, [this, node_id](StatusOr<Incoming>) {
        auto it = rank_of_.find(node_id);
        if (it != rank_of_.end()) NodesOf(it->second.first)[it->second.second].shut_down = true;
        MaybeFinish();
      });
    }
  }
  // Nodes that never answer do not hold the job open past the heartbeat timeout.
  shutdown_timer_.RunOnce(Millis(options_.heartbeat_timeout_s), [this] {
    for (auto* nodes : {&servers_, &workers_})
      for (const NodeEntry& n : *nodes)
        if (!n.shut_down) log_->warn("{} did not acknowledge the shutdown", Describe(n));
    Finish(Status::OK());
  });
  MaybeFinish();
}

void Scheduler::MaybeFinish() {
  for (auto* nodes : {&servers_, &workers_})
    for (const NodeEntry& n : *nodes)
      if (!n.shut_down) return;
  Finish(Status::OK());
}

void Scheduler::Finish(Status status) {
  if (finished_.IsSet()) return;
  log_->info("the job is over: {}", status.ok() ? "every worker finished" : status.message());
  listener_.Close();
  finished_.Set(status);
}

void Scheduler::OnClose(const Connection::Ptr& conn, const Status& reason) {
  auto it = node_of_.find(conn.get());
  if (it == node_of_.end()) return;
  auto [role, rank] = rank_of_.at(it->second);
  node_of_.erase(it);
  NodeEntry& node = NodesOf(role)[rank];
  if (shutting_down_) {
    node.shut_down = true;
    MaybeFinish();
    return;
  }
  log_->warn("lost the connection to {}: {}", Describe(node), reason.message());
}

void Scheduler::CheckHeartbeats() {
  uint64_t now = loop_.NowMs();
  uint64_t timeout = Millis(options_.heartbeat_timeout_s);
  for (auto* nodes : {&servers_, &workers_}) {
    for (NodeEntry& n : *nodes) {
      if (n.silent || n.shut_down || now - n.last_heard_ms <= timeout) continue;
      n.silent = true;
      std::string what = fmt::format("{} has sent no heartbeat for {:.1f} s", Describe(n),
                                     (now - n.last_heard_ms) / 1000.0);
      log_->warn("{}; it may have died", what);
      return AbortOnLoop(Aborted(what));
    }
  }
}

Scheduler::NodeEntry* Scheduler::FindByConnection(const Connection* conn) {
  auto it = node_of_.find(conn);
  if (it == node_of_.end()) return nullptr;
  auto [role, rank] = rank_of_.at(it->second);
  return &NodesOf(role)[rank];
}

std::string Scheduler::Describe(const NodeEntry& node) const {
  return fmt::format("the {} node id:{} (rank {}, {}:{})", RoleName(node.info.role),
                     node.info.node_id, node.info.rank, node.info.host, node.info.port);
}

size_t Scheduler::GroupSize(BarrierGroup g) const {
  switch (g) {
    case BarrierGroup::kAll:
      return servers_.size() + workers_.size();
    case BarrierGroup::kServers:
      return servers_.size();
    case BarrierGroup::kWorkers:
      return workers_.size();
  }
  return 0;
}

bool Scheduler::AllRegistered() const {
  return static_cast<int>(servers_.size()) == options_.server_num &&
         static_cast<int>(workers_.size()) == options_.worker_num;
}

}  // namespace pstrain
