#include "roles/node/cluster_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "roles/node/peers.h"

namespace pstrain {
namespace {

constexpr uint64_t kRetryMillis = 200;

}  // namespace

ClusterClient::ClusterClient(EventLoop* loop, NodeOptions options, Logger log)
    : loop_(loop),
      options_(std::move(options)),
      log_(std::move(log)),
      server_num_(options_.cluster.server_num),
      worker_num_(options_.cluster.worker_num) {}

std::string ClusterClient::SchedulerAddress() const {
  return fmt::format("{}:{}", options_.cluster.sched_host, options_.cluster.sched_port);
}

StatusOr<Topology> ClusterClient::Join(uint16_t listen_port) {
  listen_port_ = listen_port;
  bool posted = loop_->Post([this] {
    connect_deadline_ms_ = loop_->NowMs() + Millis(options_.cluster.connect_timeout_s);
    TryConnect();
  });
  if (!posted) return Aborted("the node is stopping");
  return joined_.Wait();
}

// Retries every kRetryMillis until the deadline: the scheduler may start
// after us, or be restarting.
void ClusterClient::TryConnect() {
  Connection::Connect(
      loop_, log_, options_.cluster.sched_host, options_.cluster.sched_port,
      [this](StatusOr<Connection::Ptr> conn) {
        if (verdict_.IsSet()) {
          if (conn.ok()) (*conn)->Close(Aborted("the node is stopping"));
          return;
        }
        if (conn.ok()) return OnConnected(*conn);
        last_connect_error_ = conn.status();
        if (loop_->IsStopping()) return joined_.Set(conn.status());
        // Another token (or a token on one side only) will not change by
        // trying again.
        if (conn.status().code() == StatusCode::kPermissionDenied) {
          Status refused = conn.status().WithContext(
              fmt::format("the scheduler at {} refused this node", SchedulerAddress()));
          joined_.Set(refused);
          return SetVerdict(refused);
        }
        if (loop_->NowMs() >= connect_deadline_ms_) {
          Status gone = Unavailable(fmt::format(
              "cannot reach the scheduler at {} (MS_SCHED_HOST:MS_SCHED_PORT) within {} s "
              "(PSTRAIN_CONNECT_TIMEOUT): {}",
              SchedulerAddress(), options_.cluster.connect_timeout_s,
              last_connect_error_.message()));
          joined_.Set(gone);
          return SetVerdict(gone);
        }
        retry_timer_.RunOnce(kRetryMillis, [this] { TryConnect(); });
      });
}

void ClusterClient::OnConnected(Connection::Ptr conn) {
  scheduler_ = conn;
  last_heard_ms_ = loop_->NowMs();
  conn->Start([this](const Connection::Ptr& c, Incoming&& in) { OnRequest(c, std::move(in)); },
              [this](const Connection::Ptr& c, const Status& why) {
                if (c == scheduler_) OnSchedulerLost(why);
              });
  RegisterRequest req;
  req.node.node_id = options_.node_id;
  req.node.role = options_.role;
  req.node.host = options_.node_host.empty() ? conn->LocalIp() : options_.node_host;
  req.node.port = listen_port_;
  req.node.rank = rejoining_ ? rank_.load() : options_.requested_rank;
  req.server_num = options_.cluster.server_num;
  req.worker_num = options_.cluster.worker_num;
  req.recovery_wait_s = options_.cluster.recovery_wait_s;
  req.rejoin = rejoining_;
  req.generation = generation_.load();
  req.config = options_.cluster.job_config;
  req.elastic = options_.cluster.elastic;
  req.replicas = options_.cluster.replicas;
  if (topology_) {
    req.topology_generation = topology_->generation;
    req.topology_digest = TopologyDigest(topology_->nodes, topology_->generation,
                                         topology_->server_num, topology_->worker_num);
  }
  if (!heartbeat_timer_.IsRunning())
    heartbeat_timer_.RunEvery(Millis(options_.cluster.heartbeat_interval_s),
                              [this] { CheckSchedulerHeard(); });
  conn->Call(req, [this](StatusOr<Incoming> reply) { OnRegistered(std::move(reply)); });
}

void ClusterClient::OnRegistered(StatusOr<Incoming> reply) {
  auto fail = [this](const Status& why) {
    joined_.Set(why);
    SetVerdict(why);
  };
  if (!reply.ok())
    return fail(reply.status().WithContext(
        fmt::format("the scheduler at {} refused this node", SchedulerAddress())));
  auto* ok = std::get_if<RegisterReply>(&reply->message.body);
  if (ok == nullptr)
    return fail(InvalidArgument("the scheduler answered RegisterRequest with " +
                                std::string(MessageName(reply->message.body))));
  // A node joining an elastic job learns its shape from the topology.
  const ElasticBounds& elastic = options_.cluster.elastic;
  const Role role = options_.role;
  const int count = elastic.Elastic(role)   ? elastic.Max(role)
                    : role == Role::kServer ? server_num_.load()
                                            : worker_num_.load();
  if (ok->rank < 0 || ok->rank >= count)
    return fail(InvalidArgument(fmt::format("the scheduler assigned rank {} in a job of {} {}s",
                                            ok->rank, count, RoleName(options_.role))));
  if (rejoining_) {
    if (ok->generation > generation_.load()) {
      // The job was paused without us: our state is stale.
      Status stale = Aborted(
          fmt::format("the job went on without this node (the scheduler is at generation {}, "
                      "this node at {}): rolling back",
                      ok->generation, generation_.load()));
      log_->warn("{}", stale.message());
      paused_ = true;
      return SetVerdict(stale);
    }
    rejoining_ = false;
    doubted_ = false;  // registered again at its generation: counted in
    log_->info("re-joined the restarted scheduler at {} as {} rank {}", SchedulerAddress(),
               RoleName(options_.role), rank_.load());
    if (done_reported_) scheduler_->Call(Done{}, [](StatusOr<Incoming>) {});
    FlushWaitingCalls(Status::OK());
    return;
  }
  rank_ = ok->rank;
  generation_ = ok->generation;
  joined_live_ = ok->live;
  joined_once_ = true;
  log_->info("registered with the scheduler at {} as {} rank {} (node id {}, generation {})",
             SchedulerAddress(), RoleName(options_.role), rank_.load(), options_.node_id,
             ok->generation);
}

void ClusterClient::OnRequest(const Connection::Ptr& conn, Incoming&& in) {
  last_heard_ms_ = loop_->NowMs();
  const uint64_t id = in.message.request_id;
  if (std::holds_alternative<Heartbeat>(in.message.body)) {
    conn->Reply(id, Ack{});  // a probe (scheduler step 11); a plain heartbeat has id 0
    return;
  }
  if (auto* topology = std::get_if<Topology>(&in.message.body)) {
    OnTopology(conn, id, *topology);
  } else if (auto* shutdown = std::get_if<Shutdown>(&in.message.body)) {
    conn->Reply(id, Ack{});
    if (shutdown->failed) {
      log_->error("the scheduler ended the job: {}", shutdown->reason);
      SetVerdict(Aborted(fmt::format("the scheduler ended the job: {}", shutdown->reason)));
    } else if (shutdown->stopped) {
      SetVerdict(Cancelled(shutdown->reason));
    } else {
      if (!shutdown->reason.empty())
        log_->info("the scheduler ends this node's part: {}", shutdown->reason);
      SetVerdict(Status::OK());
    }
  } else if (auto* stop = std::get_if<Stop>(&in.message.body)) {
    OnStop(conn, id, *stop);
  } else if (auto* pause = std::get_if<Pause>(&in.message.body)) {
    conn->Reply(id, Ack{});
    if (pause->worker_num > 0) {
      // An elastic job changes shape (roles/scheduler/elastic.cc).
      MutexLock lock(&held_mutex_);
      next_run_ = NextRun{pause->rank, pause->server_num, pause->worker_num};
      log_->info(
          "the job changes shape: {}; this {} registers again as rank {} of {} servers and {} "
          "workers and resumes from the checkpoint of the step the workers stopped at",
          pause->reason, RoleName(options_.role), pause->rank, pause->server_num,
          pause->worker_num);
    } else {
      log_->warn(
          "the scheduler paused the job: {}; this {} rolls back to the newest complete "
          "checkpoint",
          pause->reason, RoleName(options_.role));
    }
    paused_ = true;
    SetVerdict(Aborted("the job is paused: " + pause->reason));
  } else if (!role_requests_ || !role_requests_(conn, id, in.message.body)) {
    conn->Reply(id, ErrorReply{fmt::format("a {} does not handle {} from the scheduler",
                                           RoleName(options_.role), MessageName(in.message.body))});
  }
}

// 2. A whole list, or a delta patched into the list this node holds. A
// delta it cannot apply (it holds another generation's, or none: a process
// restarted with its node id) is refused, and the scheduler sends the whole
// list; a topology that is wrong ends the join.
void ClusterClient::OnTopology(const Connection::Ptr& conn, uint64_t id, const Topology& topology) {
  // An elastic job's shape is the scheduler's: within the bounds, it is
  // taken from the topology.
  const ElasticBounds& elastic = options_.cluster.elastic;
  if (elastic.enabled() && elastic.Allows(topology.server_num, topology.worker_num)) {
    worker_num_ = topology.worker_num;
    if (elastic.servers_elastic()) server_num_ = topology.server_num;
  }
  // 16. The list of a live change of workers, which the scheduler sends
  // once every worker is at its step: this worker's new rank with it.
  if (in_workers_change_.load() && rank_after_ >= 0 && topology.worker_num == workers_after_ &&
      !topology.delta()) {
    AdoptRank(rank_after_);
    rank_after_ = -1;
    in_workers_change_ = false;
  }
  auto patched = ApplyTopology(topology_ ? &*topology_ : nullptr, topology, options_.role,
                               rank_.load(), server_num_, worker_num_, options_.cluster.replicas);
  if (!patched.ok()) {
    conn->Reply(id, ErrorReply{patched.status().message()});
    if (patched.status().code() == StatusCode::kFailedPrecondition) {
      log_->info("refused {}: asking the scheduler for the whole list", patched.status().message());
      return;
    }
    joined_.Set(patched.status().WithContext("bad topology from the scheduler"));
    return;
  }
  conn->Reply(id, Ack{});
  if (topology.delta()) {
    log_->info("topology of generation {}: {} of {} peers changed (a delta from generation {})",
               topology.generation, topology.nodes.size(), patched->nodes.size(),
               topology.base_generation);
  } else {
    log_->info("topology of generation {}: the whole list of {} peers", topology.generation,
               topology.nodes.size());
  }
  topology_ = std::move(*patched);
  {
    MutexLock lock(&held_mutex_);
    held_ = *topology_;
  }
  joined_.Set(*topology_);  // later ones (a scheduler rejoined) are acknowledged only
}

void ClusterClient::Recall(Topology held) {
  {
    MutexLock lock(&held_mutex_);
    held_ = held;
  }
  // Before Join's own closure: the topology is in place when the first comes.
  loop_->Post([this, held = std::move(held)]() mutable { topology_ = std::move(held); });
}

std::optional<Topology> ClusterClient::Held() {
  MutexLock lock(&held_mutex_);
  return held_;
}

std::optional<ClusterClient::NextRun> ClusterClient::next_run() {
  MutexLock lock(&held_mutex_);
  return next_run_;
}

void ClusterClient::SetVerdict(const Status& verdict) {
  if (verdict_.IsSet()) return;
  verdict_.Set(verdict);
  // A verdict before the topology (the job ended while this node waited to
  // join) ends the wait in Join() too.
  joined_.Set(verdict.ok() ? Aborted("the job ended before this node joined it") : verdict);
  ReleaseHold();
  heartbeat_timer_.Stop();
  retry_timer_.Stop();
  FlushWaitingCalls(verdict.ok() ? Aborted("the job is over") : verdict);
  // A verdict that is not the job's normal end leaves peers mid-request:
  // closing every connection makes their waits return.
  if (!verdict.ok() && interrupt_) interrupt_(verdict);
}

void ClusterClient::ReportProgress(int64_t step, double samples_per_s) {
  progress_step_.store(std::max<int64_t>(step, -1));
  // The scheduler refuses a rate that is not a finite number >= 0.
  progress_rate_.store(std::isfinite(samples_per_s) ? std::max(samples_per_s, 0.0) : 0.0);
}

void ClusterClient::ReportValidation(int epoch, const std::string& metric, double value) {
  MutexLock lock(&validation_mutex_);
  // The scheduler refuses a value that is not -1 or a finite number >= 0.
  validation_.validation = std::isfinite(value) && value >= 0 ? value : -1;
  validation_.validation_epoch = std::max(epoch, 0);
  validation_.validation_metric = metric;
}

Heartbeat ClusterClient::CurrentHeartbeat() const {
  MutexLock lock(&validation_mutex_);
  Heartbeat beat = validation_;
  beat.step = progress_step_.load();
  beat.samples_per_s = progress_rate_.load();
  beat.held_view = held_view_.load();
  return beat;
}

void ClusterClient::ReportReplicasHeld(int64_t view) {
  if (view <= held_view_.load()) return;
  held_view_.store(view);
  loop_->Post([this] {
    if (scheduler_) scheduler_->Notify(CurrentHeartbeat());
  });
}

// Heartbeats go out, and a scheduler silent past the timeout counts as lost.
void ClusterClient::CheckSchedulerHeard() {
  const uint64_t now = loop_->NowMs();
  const uint64_t timeout = Millis(options_.cluster.heartbeat_timeout_s);
  const bool stalled = NoticeStall(now, timeout);
  if (rejoining_) {
    // A stopped scheduler's port still accepts connections (the kernel's
    // backlog) but never answers: the rejoin as a whole has the deadline.
    if (now >= connect_deadline_ms_) {
      if (scheduler_) scheduler_->Close(DeadlineExceeded("the scheduler does not answer"));
      SetVerdict(Unavailable(fmt::format(
          "lost the scheduler at {} and could not rejoin it within {} s (PSTRAIN_CONNECT_TIMEOUT)",
          SchedulerAddress(), options_.cluster.connect_timeout_s)));
    }
    return;
  }
  if (!scheduler_) return;
  scheduler_->Notify(CurrentHeartbeat());
  if (stalled) return;  // what came meanwhile is read after this
  if (now - last_heard_ms_ > timeout) {
    // Its silence may be a cut that kept this node's heartbeats from it too.
    DoubtStanding();
    scheduler_->Close(DeadlineExceeded(fmt::format("the scheduler has been silent for {:.1f} s",
                                                   (now - last_heard_ms_) / 1000.0)));
  }
  ExpireOverdueCalls(loop_, 2 * timeout);
}

// A node stopped or starved past half the heartbeat timeout has not read
// the scheduler's heartbeats of that time: its silence is no evidence
// (roles/node/stall_watch.h). Nor has it sent its own: the scheduler may
// have counted it lost meanwhile.
bool ClusterClient::NoticeStall(uint64_t now, uint64_t timeout) {
  const uint64_t late =
      stall_watch_.Check(now, Millis(options_.cluster.heartbeat_interval_s), timeout);
  if (late == 0) return false;
  DoubtStanding();
  log_->warn(
      "this node was stalled for {:.1f} s (a stopped process, a paused machine or a starved "
      "CPU): the scheduler gets a fresh heartbeat timeout instead of being judged on it",
      late / 1000.0);
  last_heard_ms_ = now;
  return true;
}

bool ClusterClient::CountedIn() {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  if (verdict_.IsSet() || paused_.load()) return false;
  // Stalled, and the heartbeat check has not run since: the scheduler sees
  // this node's last heartbeat as old as that check (it sends one). The
  // loop's clock is read afresh: a stall inside one round of callbacks
  // leaves the cached one behind.
  if (!doubted_ &&
      stall_watch_.Overdue(loop_->FreshNowMs(), Millis(options_.cluster.heartbeat_interval_s),
                           Millis(options_.cluster.heartbeat_timeout_s)))
    DoubtStanding();
  // A scheduler that closed its link (or stopped) with no doubt is no
  // reason to stop: training needs no scheduler, and none can have taken
  // this node's place without hearing it fall silent.
  return !doubted_;
}

// The scheduler answers a heartbeat sent as a call only while it counts
// this node in: it closed a lost node's connection, and what it sent
// before that (read after the stall) proves nothing. Each doubt asks
// again: only the answer to the newest question counts. Without a link,
// the doubt stays until this node registers again.
void ClusterClient::DoubtStanding() {
  doubted_ = true;
  const uint64_t asked = ++doubts_;
  if (!scheduler_ || rejoining_) return;
  scheduler_->Call(CurrentHeartbeat(), [this, asked](StatusOr<Incoming> reply) {
    if (reply.ok() && asked == doubts_) doubted_ = false;
  });
}

void ClusterClient::OnSchedulerLost(const Status& reason) {
  scheduler_.reset();
  if (verdict_.IsSet()) return;
  if (!joined_once_ || loop_->IsStopping()) {
    Status lost = Unavailable(fmt::format("lost the connection to the scheduler at {}: {}",
                                          SchedulerAddress(), reason.message()));
    joined_.Set(lost);
    return SetVerdict(lost);
  }
  // 9. Training needs no scheduler: reconnect in the background.
  log_->warn("lost the scheduler at {}: {}; trying to rejoin it for up to {} s", SchedulerAddress(),
             reason.message(), options_.cluster.connect_timeout_s);
  rejoining_ = true;
  connect_deadline_ms_ = loop_->NowMs() + Millis(options_.cluster.connect_timeout_s);
  retry_timer_.RunOnce(kRetryMillis, [this] { TryConnect(); });
}

void ClusterClient::CallWhenConnected(MessageBody body, Connection::ReplyCallback done) {
  if (verdict_.IsSet()) return done(Aborted("the node's part in the job is over"));
  if (scheduler_ && !rejoining_) return scheduler_->Call(std::move(body), std::move(done));
  waiting_calls_.emplace_back(std::move(body), std::move(done));
}

void ClusterClient::FlushWaitingCalls(const Status& failed) {
  auto calls = std::move(waiting_calls_);
  waiting_calls_.clear();
  for (auto& [body, done] : calls) {
    if (!failed.ok() || !scheduler_) {
      done(failed.ok() ? Unavailable("not connected to the scheduler") : failed);
    } else {
      scheduler_->Call(std::move(body), std::move(done));
    }
  }
}

StatusOr<Incoming> ClusterClient::CallScheduler(MessageBody body, const std::string& what) {
  Completion<StatusOr<Incoming>> done;
  bool posted = loop_->Post([this, body = std::move(body), done]() mutable {
    // A lost connection or a verdict fails the call, so this always completes.
    CallWhenConnected(std::move(body),
                      [done](StatusOr<Incoming> reply) { done.Set(std::move(reply)); });
  });
  if (!posted) return Aborted(fmt::format("{}: the node is stopping", what));
  StatusOr<Incoming> reply = done.Wait();
  if (!reply.ok()) return reply.status().WithContext(what);
  return reply;
}

Status ClusterClient::Barrier(BarrierGroup group) { return AgreeMin(group, 0).status(); }

StatusOr<BarrierReply> ClusterClient::EnterBarrier(BarrierRequest request) {
  std::string what = fmt::format("barrier of {}", BarrierGroupName(request.group));
  auto reply = CallScheduler(std::move(request), what);
  if (!reply.ok()) return reply.status();
  auto* agreed = std::get_if<BarrierReply>(&reply->message.body);
  if (agreed == nullptr)
    return InvalidArgument(
        fmt::format("{}: the scheduler answered with {}", what, MessageName(reply->message.body)));
  return std::move(*agreed);
}

StatusOr<int64_t> ClusterClient::AgreeMin(BarrierGroup group, int64_t value) {
  auto reply = EnterBarrier(BarrierRequest{group, value, ""});
  if (!reply.ok()) return reply.status();
  return reply->min_value;
}

StatusOr<std::string> ClusterClient::ShareFromOne(BarrierGroup group, std::string blob) {
  auto reply = EnterBarrier(BarrierRequest{group, 0, std::move(blob)});
  if (!reply.ok()) return reply.status();
  return std::move(reply->blob);
}

Status ClusterClient::ReportDone() {
  // 16. A worker that left live is no member to be done: the scheduler
  // sends it off once the others go on.
  if (left_live_.load()) return Status::OK();
  loop_->Post([this] { done_reported_ = true; });
  Status sent = CallScheduler(Done{}, "report Done").status();
  // The connection to the scheduler broke under the call: a rejoin (9)
  // sends Done again, and the verdict (WaitForShutdown) tells how the job
  // ended either way.
  if (sent.code() == StatusCode::kUnavailable) return Status::OK();
  return sent;
}

void ClusterClient::ReportFailure(const Status& why, bool recoverable,
                                  const std::optional<NodeInfo>& peer) {
  NodeFailed failed{why.message(), recoverable};
  if (peer) {
    failed.peer_role = peer->role;
    failed.peer_rank = peer->rank;
  }
  Completion<Status> sent;
  bool posted = loop_->Post([this, failed, sent] {
    if (!scheduler_ || rejoining_ || verdict_.IsSet()) return sent.Set(Status::OK());
    scheduler_->Call(failed, [sent](StatusOr<Incoming> reply) { sent.Set(reply.status()); });
  });
  if (posted) sent.WaitFor(std::chrono::milliseconds(Millis(options_.cluster.heartbeat_timeout_s)));
}

void ClusterClient::RequestStop(const std::string& why) {
  // In an elastic job the node leaves; the scheduler stops the whole job
  // only when that would take it below its minimum.
  CallWhenConnected(StopRequest{why, options_.cluster.elastic.enabled()},
                    [this](StatusOr<Incoming> reply) {
                      if (!reply.ok())
                        log_->warn("asking the scheduler to stop: {}", reply.status().message());
                    });
}

Status ClusterClient::WaitForShutdown() { return verdict_.Wait(); }

std::optional<Status> ClusterClient::WaitForVerdict(double timeout_s) {
  return verdict_.WaitFor(std::chrono::milliseconds(Millis(timeout_s)));
}

}  // namespace pstrain
