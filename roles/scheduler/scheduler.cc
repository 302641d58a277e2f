#include "roles/scheduler/scheduler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "comm/transport/tls.h"
#include "src/common/config/identity.h"
#include "src/common/open_files.h"

namespace pstrain {
Scheduler::Scheduler(ClusterOptions options, Logger log)
    : options_(std::move(options)),
      log_(std::move(log)),
      listener_(&loop_, log_),
      servers_(static_cast<size_t>(std::max(options_.server_num, 0))),
      workers_(static_cast<size_t>(std::max(options_.worker_num, 0))) {
  loop_.SetSecurity(SecurityFrom(options_));
  if (!options_.job_config_source.empty()) {
    reference_config_ = options_.job_config;
    reference_name_ = fmt::format("the scheduler's ({})", options_.job_config_source);
  }
}

Scheduler::~Scheduler() {
  const Status stopped = loop_.Stop();
  if (!stopped.ok()) log_->error("stopping the scheduler: {}", stopped.message());
}

StatusOr<uint16_t> Scheduler::Start() {
  PSTRAIN_RETURN_IF_ERROR(
      CheckOpenFileLimit(options_.server_num + options_.worker_num + kSpareDescriptors,
                         fmt::format("the scheduler of {} servers and {} workers",
                                     options_.server_num, options_.worker_num)));
  auto tls = TlsContext::LoadIfSet(options_.tls);
  if (!tls.ok()) return tls.status();
  loop_.set_tls(std::move(*tls));
  PSTRAIN_RETURN_IF_ERROR(loop_.Start());
  return loop_.Call<StatusOr<uint16_t>>(
      [this]() -> StatusOr<uint16_t> {
        auto port = listener_.Listen(options_.sched_host, options_.sched_port,
                                     [this](Connection::Ptr c) { OnAccept(std::move(c)); });
        if (!port.ok()) return port.status();
        started_ms_ = loop_.NowMs();
        PSTRAIN_RETURN_IF_ERROR(ServeHttp());
        signals_.Watch([this](const char* name) {
          log_->warn("{} received: stopping the job cleanly (send it again to exit at once)", name);
          BeginStop(fmt::format("{} to the scheduler", name));
        });
        heartbeat_timer_.RunEvery(Millis(options_.heartbeat_interval_s),
                                  [this] { CheckHeartbeats(); });
        register_timer_.RunOnce(Millis(options_.register_timeout_s), [this] {
          if (topology_sent_) return;
          std::string refused;
          for (const std::string& r : refusals_) refused += "; refused " + r;
          AbortOnLoop(DeadlineExceeded(
              fmt::format("not every node registered within {} s (PSTRAIN_REGISTER_TIMEOUT): "
                          "missing {}{}",
                          options_.register_timeout_s, MissingRanks(), refused)));
        });
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

// 6. Every node hears why, then the job is over.
void Scheduler::AbortOnLoop(const Status& why) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (finished_.IsSet() || shutting_down_) return;
  log_->error("ending the job: {}", why.message());
  EndNow(Shutdown{why.message(), /*failed=*/true}, why);
}

// Every connected node gets `shutdown`; the job is over (`result`) once all
// have answered, or after a short wait: a node that cannot answer is likely
// why the job ends.
void Scheduler::EndNow(const Shutdown& shutdown, const Status& result) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  shutting_down_ = true;
  paused_ = false;
  register_timer_.Stop();
  RefuseJoiners("the job has ended: " + shutdown.reason);
  auto waiting = std::make_shared<CountDown>(AllNodes().size() + 1,
                                             [this, result](const Status&) { Finish(result); });
  for (NodeEntry* n : AllNodes()) {
    auto conn = n->conn.lock();
    if (!conn || conn->closed()) {
      waiting->Report(Status::OK());
      continue;
    }
    conn->Call(shutdown, [waiting](StatusOr<Incoming>) { waiting->Report(Status::OK()); });
  }
  waiting->Report(Status::OK());
  shutdown_timer_.RunOnce(std::min<uint64_t>(2000, Millis(options_.heartbeat_timeout_s)),
                          [this, result] { Finish(result); });
}

void Scheduler::OnAccept(Connection::Ptr conn) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  conn->Start([this](const Connection::Ptr& c, Incoming&& in) { OnRequest(c, std::move(in)); },
              [this](const Connection::Ptr& c, const Status& why) { OnClose(c, why); });
}

void Scheduler::OnRequest(const Connection::Ptr& conn, Incoming&& in) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  const uint64_t id = in.message.request_id;
  if (auto* reg = std::get_if<RegisterRequest>(&in.message.body)) {
    HandleRegister(conn, id, *reg);
    return;
  }
  // `pstrain scale`: no node, but the handshake proved the cluster token.
  if (auto* scale = std::get_if<ScaleRequest>(&in.message.body)) {
    HandleScale(conn, id, *scale);
    return;
  }
  NodeEntry* node = FindByConnection(conn.get());
  if (node == nullptr) {
    conn->Reply(id, ErrorReply{fmt::format("{} from an unregistered connection: register first",
                                           MessageName(in.message.body))});
    return;
  }
  node->last_heard_ms = loop_.NowMs();
  if (auto* heartbeat = std::get_if<Heartbeat>(&in.message.body)) {
    if (heartbeat->step >= 0 && node->info.role == Role::kWorker) {
      node->step = heartbeat->step;
      node->samples_per_s = heartbeat->samples_per_s;
      best_step_ = std::max(best_step_, heartbeat->step);
    }
    if (heartbeat->validation >= 0 && node->info.role == Role::kWorker)
      node->validation = *heartbeat;
    // Never a view this scheduler has not sent (a stale or confused report).
    if (heartbeat->held_view > node->held_view && heartbeat->held_view <= server_view_.view &&
        node->info.role == Role::kServer)
      NoteReplicasHeld(*node, heartbeat->held_view);
    // A node that stalled asks whether it is still counted in: it is.
    if (id != 0) conn->Reply(id, Ack{});
    return;
  }
  if (auto* barrier = std::get_if<BarrierRequest>(&in.message.body)) {
    HandleBarrier(conn, id, *node, *barrier);
  } else if (std::holds_alternative<Done>(in.message.body)) {
    HandleDone(conn, id, *node);
  } else if (auto* changed = std::get_if<ShapeChanged>(&in.message.body)) {
    HandleShapeChanged(conn, id, *changed);
  } else if (auto* stop = std::get_if<StopRequest>(&in.message.body)) {
    conn->Reply(id, Ack{});
    if (stop->leave && elastic_.enabled() && Leave(*node, stop->reason)) return;
    BeginStop(stop->reason);
  } else if (auto* failed = std::get_if<NodeFailed>(&in.message.body)) {
    conn->Reply(id, Ack{});
    const std::string what = fmt::format("{} failed: {}", Describe(*node), failed->reason);
    if (paused_) return;  // the rollback under way takes care of it
    // A lost peer between two live nodes: every node is still here, so a
    // rollback (with recovery) needs no replacement.
    if (failed->recoverable && recovery_wait_s_ > 0 && stop_reason_.empty() && topology_sent_ &&
        !shutting_down_) {
      log_->warn("{}", what);
      if (GiveUpOnLink(*node, *failed, what)) return;
      return BeginPause(what);
    }
    AbortOnLoop(Aborted(what));
  } else {
    conn->Reply(id, ErrorReply{fmt::format("the scheduler does not handle {}",
                                           MessageName(in.message.body))});
  }
}

Status Scheduler::CheckRegistration(const RegisterRequest& req) const {
  if (req.node.role == Role::kScheduler)
    return InvalidArgument("a scheduler cannot register with another scheduler");
  if (req.elastic.enabled()) {
    // 13. An elastic job's shape is the scheduler's, within the bounds.
    const int workers = Count(Role::kWorker), servers = Count(Role::kServer);
    if (!req.elastic.Allows(servers, workers))
      return InvalidArgument(fmt::format(
          "the job has {} servers and {} workers, outside its train.elastic bounds ({})", servers,
          workers, DescribeBounds(req.elastic)));
  } else if (req.server_num != options_.server_num || req.worker_num != options_.worker_num)
    return InvalidArgument(fmt::format(
        "node was started with MS_SERVER_NUM={} MS_WORKER_NUM={} but the scheduler with "
        "MS_SERVER_NUM={} MS_WORKER_NUM={}",
        req.server_num, req.worker_num, options_.server_num, options_.worker_num));
  if (shutting_down_) return FailedPrecondition("the job is shutting down");
  return Status::OK();
}

Status Scheduler::CheckSameConfig(const RegisterRequest& req) const {
  if (!reference_config_ || req.config == *reference_config_) return Status::OK();
  return FailedPrecondition(fmt::format(
      "its config differs from {}: {} (every node of a job must run the same config; only {} "
      "may differ)",
      reference_name_,
      DescribeConfigDifference(req.config, "on this node", *reference_config_, "there"),
      fmt::join(kNodeLocalKeys, ", ")));
}

void Scheduler::HandleRegister(const Connection::Ptr& conn, uint64_t id,
                               const RegisterRequest& req) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  NodeInfo info = req.node;
  if (info.host.empty()) info.host = conn->peer().substr(0, conn->peer().rfind(':'));
  const char* role = RoleName(info.role);
  auto refuse = [&](const Status& why) {
    log_->warn("refused {} node id:{} from {}: {}", role, info.node_id, conn->peer(),
               why.message());
    if (refusals_.size() < 8)
      refusals_.push_back(fmt::format("{} node id:{} ({})", role, info.node_id, why.message()));
    conn->Reply(id, ErrorReply{why.message()});
  };
  if (req.rejoin && shutting_down_ && ending_) return RejoinAtShutdown(conn, id, req);
  if (Status st = CheckRegistration(req); !st.ok()) return refuse(st);
  if (Status st = CheckSameConfig(req); !st.ok()) return refuse(st);
  // Without a config of its own, the scheduler takes the first admitted
  // node's as the job's.
  auto admit = [&](const NodeInfo& admitted, const char* how) {
    if (!reference_config_) {
      reference_config_ = req.config;
      reference_name_ = fmt::format("the first node's ({} node id:{})", role, info.node_id);
    }
    Admit(conn, id, admitted, how, req);
  };
  // One connection is one node: a second identity on it would hold a slot
  // that no heartbeat, barrier or Done could ever fill.
  if (auto it = node_of_.find(conn.get()); it != node_of_.end() && it->second != info.node_id)
    return refuse(InvalidArgument(
        fmt::format("this connection is already registered as node id {}", it->second)));
  if (rank_of_.empty()) {  // the config check keeps these the same
    elastic_ = req.elastic;
    replicas_ = req.replicas;
  }
  // Whether workers change live depends on the training files a worker
  // sees too (split by file or not): every worker must say so.
  if (info.role == Role::kWorker) {
    elastic_.live_workers = elastic_.live_workers && req.elastic.live_workers;
    elastic_.finish_lost = elastic_.finish_lost && req.elastic.finish_lost;
    elastic_.drop_lost = elastic_.drop_lost && req.elastic.drop_lost;
  }
  if (req.recovery_wait_s != recovery_wait_s_) {
    if (rank_of_.empty()) {
      recovery_wait_s_ = req.recovery_wait_s;
    } else {
      log_->warn("{} node id:{} has train.recovery wait {} s, the job {} s: keeping the job's",
                 role, info.node_id, req.recovery_wait_s, recovery_wait_s_);
    }
  }

  auto known = rank_of_.find(info.node_id);
  // 11. A node id belongs to the process that registered it while that one
  // lives: a second registration waits for the first to answer a probe.
  if (known != rank_of_.end()) {
    NodeEntry& holder = NodesOf(known->second.first)[known->second.second];
    if (auto old = holder.conn.lock(); old && old != conn && !old->closed() && !holder.lost)
      return HoldForProbe(conn, id, req, holder, old);
  }
  if (known != rank_of_.end() && known->second.first != info.role)
    return refuse(InvalidArgument(fmt::format("node id {} is already registered as a {}",
                                              info.node_id, RoleName(known->second.first))));
  // 13. An elastic job renumbers its nodes: a node that asks for the rank
  // it had before a change it has not heard of yet gets its new one.
  if (known != rank_of_.end() && info.rank >= 0 && info.rank != known->second.second &&
      elastic_.enabled())
    info.rank = known->second.second;
  if (known != rank_of_.end() && info.rank >= 0 && info.rank != known->second.second)
    return refuse(
        InvalidArgument(fmt::format("node id {} holds {} rank {}, not rank {}", info.node_id, role,
                                    known->second.second, info.rank)));

  // 9. A running node that lost the scheduler.
  if (req.rejoin) {
    if (req.generation < generation_ ||
        (known != rank_of_.end() && NodesOf(info.role)[known->second.second].lost)) {
      // The job went on without it (it was lost and rolled back): the reply's
      // newer generation tells it to drop its state and register anew.
      int rank = known != rank_of_.end() ? known->second.second : info.rank;
      log_->info("{} node id:{} rejoins from generation {}; the job is at {}: it must roll back",
                 role, info.node_id, req.generation, generation_);
      conn->Reply(id, RegisterReply{rank, generation_ + 1});
      return;
    }
    if (known == rank_of_.end()) {
      // A restarted scheduler learns the ranks from the nodes themselves.
      if (info.rank < 0) return refuse(InvalidArgument("a rejoining node must name its rank"));
      auto rank = PickRank(info.role, info.rank);
      if (!rank.ok()) return refuse(rank.status());
      info.rank = *rank;
    } else {
      info.rank = known->second.second;
    }
    SetGeneration(std::max(generation_, req.generation));
    return admit(info, "rejoined, keeps");
  }

  if (known != rank_of_.end()) {
    NodeEntry& node = NodesOf(info.role)[known->second.second];
    // 17. Its heir holds its partitions: it joins as a backup.
    if (node.lost && info.role == Role::kServer && server_view_.view > 0 && !paused_) {
      info.rank = known->second.second;
      return JoinAsBackup(conn, id, info, req);
    }
    // 4. Registered again while the job runs: the node restarted and its
    // state is gone. (Before the job starts, or while it is paused, a
    // restart loses nothing.)
    if (topology_sent_ && !paused_ && !node.lost) {
      LoseNode(node, "it restarted (registered again with its node id)");
      if (!paused_)
        return refuse(FailedPrecondition("the job has ended: " + info.node_id +
                                         " restarted and the job cannot recover"));
    }
    info.rank = known->second.second;
    return admit(info, "registered again, keeps");
  }
  auto rank = PickRank(info.role, info.rank);
  if (rank.ok() && info.role == Role::kServer && server_view_.view > 0 && !paused_ &&
      servers_[static_cast<size_t>(*rank)].lost) {
    info.rank = *rank;
    return JoinAsBackup(conn, id, info, req);
  }
  // 13. No rank free in a running elastic job: a join (a rank asked for
  // past the current shape, such as a new pod's index, is not kept).
  if (!rank.ok() && elastic_.enabled() && topology_sent_ &&
      (info.rank < 0 || info.rank >= Count(info.role)))
    return QueueJoiner(conn, id, req, info);
  if (!rank.ok()) return refuse(rank.status());
  info.rank = *rank;
  admit(info, "assign");
}

StatusOr<int> Scheduler::PickRank(Role role, int requested) const {
  const std::vector<NodeEntry>& nodes = role == Role::kServer ? servers_ : workers_;
  const char* count_var = role == Role::kServer ? "MS_SERVER_NUM" : "MS_WORKER_NUM";
  auto free = [&](const NodeEntry& n) {
    // A lost rank is free while the job waits for its replacement.
    // 17. So is a lost server's of a replicated job (its heir took over).
    return n.info.node_id.empty() || (n.lost && (paused_ || !topology_sent_)) ||
           (n.lost && role == Role::kServer && server_view_.view > 0);
  };
  if (requested >= 0) {
    if (requested >= static_cast<int>(nodes.size()))
      return InvalidArgument(fmt::format("asks for {} rank {} but the job has {}={}",
                                         RoleName(role), requested, count_var, nodes.size()));
    if (!free(nodes[requested]))
      return FailedPrecondition(fmt::format(
          "asks for {} rank {}, which node id:{} already holds (two nodes with one MS_NODE_RANK?)",
          RoleName(role), requested, nodes[requested].info.node_id));
    return requested;
  }
  // A rank never held first: a lost one may yet come back with its node id.
  size_t& r = never_held_from_[role == Role::kServer ? 0 : 1];
  while (r < nodes.size() && !nodes[r].info.node_id.empty()) ++r;
  if (r < nodes.size()) return static_cast<int>(r);
  for (size_t held = 0; held < nodes.size(); ++held)
    if (free(nodes[held])) return static_cast<int>(held);
  return FailedPrecondition(fmt::format("the job has {}={} and all {} {}s are registered",
                                        count_var, nodes.size(), nodes.size(), RoleName(role)));
}

// Gives `info.rank` to the node on `conn` for the current generation.
void Scheduler::Admit(const Connection::Ptr& conn, uint64_t id, NodeInfo info, const char* how,
                      const RegisterRequest& req) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  NodeEntry& node = NodesOf(info.role)[info.rank];
  if (node.info.node_id != info.node_id) rank_of_.erase(node.info.node_id);
  if (auto old = node.conn.lock(); old && old != conn) {
    node_of_.erase(old.get());
    old->Close(Aborted("replaced by a new registration of the same rank"));
  }
  const bool replacement = node.lost;
  if (!HeldNow(node)) ++held_now_;
  const NodeEntry before = std::move(node);
  node = NodeEntry{info, conn, loop_.NowMs(), generation_};
  CarryTopologyRecord(before, &node);
  node.claimed_generation = req.topology_generation;
  node.claimed_digest = req.topology_digest;
  rank_of_[info.node_id] = {info.role, info.rank};
  node_of_[conn.get()] = info.node_id;
  log_->info("The {} node id:{},node ip: {},node port:{} {} rank id:{}{}", RoleName(info.role),
             info.node_id, info.host, info.port, how, info.rank,
             replacement ? " (replaces the lost node)" : "");
  conn->Reply(id, RegisterReply{info.rank, generation_, admitting_live_});
  if (paused_) return MaybeResume();
  if (!AllRegistered()) return;
  // 3. Everyone is in: wire the topology (again, for nodes that rejoined).
  SendTopology();
  if (!topology_sent_) {
    topology_sent_ = true;
    register_timer_.Stop();
    log_->info("Start the scheduler node is successful!");
  }
}

void Scheduler::HandleBarrier(const Connection::Ptr& conn, uint64_t id, NodeEntry& node,
                              const BarrierRequest& request) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  const BarrierGroup group = request.group;
  bool member = group == BarrierGroup::kAll ||
                (group == BarrierGroup::kServers && node.info.role == Role::kServer) ||
                (group == BarrierGroup::kWorkers && node.info.role == Role::kWorker);
  if (paused_ || node.generation != generation_) {
    conn->Reply(id, ErrorReply{fmt::format("{} cannot enter the barrier of {}: the job is paused",
                                           Describe(node), BarrierGroupName(group))});
    return;
  }
  if (!member || !topology_sent_) {
    conn->Reply(
        id, ErrorReply{fmt::format("{} cannot enter the barrier of {}: {}", Describe(node),
                                   BarrierGroupName(group),
                                   member ? "not every node has registered yet" : "not a member")});
    return;
  }
  Barrier& barrier = barriers_[static_cast<size_t>(group)];
  std::vector<BarrierWaiter>& waiters = barrier.waiters;
  BarrierWaiter waiter{conn, id, node.info.node_id, node.info.rank, request.value, request.blob};
  // A node that asks again (it reconnected) replaces its earlier request.
  auto [slot, fresh] = barrier.slot_of.try_emplace(node.info.node_id, waiters.size());
  if (fresh) {
    waiters.push_back(std::move(waiter));
  } else {
    waiters[slot->second] = std::move(waiter);
  }
  log_->debug("{} entered the barrier of {} ({} of {})", Describe(node), BarrierGroupName(group),
              waiters.size(), GroupSize(group));
  ReleaseIfComplete(group);
}

void Scheduler::ReleaseIfComplete(BarrierGroup group) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  Barrier& barrier = barriers_[static_cast<size_t>(group)];
  std::vector<BarrierWaiter>& waiters = barrier.waiters;
  if (waiters.empty() || waiters.size() < GroupSize(group)) return;
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
  barrier.slot_of.clear();
}

void Scheduler::HandleDone(const Connection::Ptr& conn, uint64_t id, NodeEntry& node) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (node.info.role != Role::kWorker) {
    conn->Reply(id, ErrorReply{"only workers report Done"});
    return;
  }
  conn->Reply(id, Ack{});
  if (node.done) return;
  node.done = true;
  if (!reshaping_) log_->info("{} finished its work", Describe(node));
  if (paused_) return;
  for (const NodeEntry& w : workers_)
    if (!w.done && !live_lost_.count(w.info.node_id)) return;
  // 16. The job ended before the step of a live change of workers: there
  // is nothing left to change.
  if (!live_ranks_.empty()) {
    RequeueLiveJoiners();
    reshaping_ = false;
  }
  // 13. They stopped for a change of shape (or finished the job before it),
  // unless a stop on request came meanwhile (15: it waits for a lost
  // worker's step to finish).
  if (reshaping_ && reshape_step_ >= 0 && stop_reason_.empty()) return ApplyReshape();
  reshaping_ = false;
  BeginShutdown();
}

// 6. Every worker is done: tell every node to stop.
void Scheduler::BeginShutdown() {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (shutting_down_) return;
  shutting_down_ = true;
  RefuseJoiners("the job is ending");
  log_->info("all {} workers finished; stopping {} servers and {} workers", workers_.size(),
             servers_.size(), workers_.size());
  ending_ = stop_reason_.empty() ? Shutdown{"all workers finished"}
                                 : Shutdown{"stopped on request: " + stop_reason_, false, true};
  for (auto* nodes : {&servers_, &workers_}) {
    for (NodeEntry& n : *nodes) {
      auto conn = n.conn.lock();
      if (!conn || conn->closed()) {
        // 4. One whose connection broke during a stall of ours rejoins to
        // hear the end (RejoinAtShutdown).
        if (loop_.NowMs() < rejoin_grace_until_ms_) n.awaiting_rejoin = true;
        n.shut_down = !n.awaiting_rejoin;
        continue;
      }
      std::string node_id = n.info.node_id;
      conn->Call(*ending_, [this, node_id](StatusOr<Incoming> answer) {
        auto it = rank_of_.find(node_id);
        if (it == rank_of_.end()) return MaybeFinish();
        NodeEntry& node = NodesOf(it->second.first)[it->second.second];
        // 4. Its connection broke during a stall of ours: it rejoins.
        if (!answer.ok() && loop_.NowMs() < rejoin_grace_until_ms_) {
          node.awaiting_rejoin = true;
          return;
        }
        node.shut_down = true;
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
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  for (auto* nodes : {&servers_, &workers_})
    for (const NodeEntry& n : *nodes)
      if (!n.shut_down) return;
  Finish(stop_reason_.empty() ? Status::OK() : Cancelled("stopped on request: " + stop_reason_));
}

void Scheduler::Finish(Status status) {
  PSTRAIN_DCHECK_ON_LOOP(&loop_);
  if (finished_.IsSet()) return;
  log_->info("the job is over: {}", status.ok() ? "every worker finished" : status.message());
  listener_.Close();
  http_.Close();
  finished_.Set(status);
}

std::string Scheduler::MissingRanks() const {
  std::string out;
  for (const auto* nodes : {&servers_, &workers_})
    for (size_t r = 0; r < nodes->size(); ++r)
      if ((*nodes)[r].generation != generation_)
        out += fmt::format("{}{} rank {}", out.empty() ? "" : ", ",
                           nodes == &servers_ ? "server" : "worker", r);
  return out.empty() ? "none" : out;
}

std::vector<Scheduler::NodeEntry*> Scheduler::AllNodes() {
  std::vector<NodeEntry*> all;
  for (auto* nodes : {&servers_, &workers_})
    for (NodeEntry& n : *nodes)
      if (!n.info.node_id.empty()) all.push_back(&n);
  return all;
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
    case BarrierGroup::kAll:  // 15. a lost worker's step is finished without it
      return servers_.size() + workers_.size() - live_lost_.size();
    case BarrierGroup::kServers:
      return servers_.size();
    case BarrierGroup::kWorkers:
      return workers_.size() - live_lost_.size();
  }
  return 0;
}

void Scheduler::SetGeneration(int64_t generation) {
  if (generation == generation_) return;
  generation_ = generation;
  CountHeld();
}

void Scheduler::CountHeld() {
  held_now_ = 0;
  for (const auto* nodes : {&servers_, &workers_})
    for (const NodeEntry& n : *nodes) held_now_ += HeldNow(n) ? 1 : 0;
}

}  // namespace pstrain
