#include "roles/cluster_client.h"

#include <fmt/format.h>

namespace pstrain {
namespace {

constexpr uint64_t kRetryMillis = 200;

uint64_t Millis(double seconds) { return static_cast<uint64_t>(seconds * 1000.0 + 0.5); }

// A topology must list each rank of each role exactly once, as many as the job
// has; everything later indexes by rank and relies on it.
Status CheckTopology(const Topology& t, const ClusterOptions& c) {
  std::vector<int> seen_servers(c.server_num), seen_workers(c.worker_num);
  for (const NodeInfo& n : t.nodes) {
    std::vector<int>* seen = n.role == Role::kServer   ? &seen_servers
                             : n.role == Role::kWorker ? &seen_workers
                                                       : nullptr;
    if (seen == nullptr || n.rank < 0 || n.rank >= static_cast<int>(seen->size()) ||
        (*seen)[n.rank]++ > 0)
      return InvalidArgument(
          fmt::format("topology lists {} rank {} wrongly", RoleName(n.role), n.rank));
  }
  if (t.nodes.size() != static_cast<size_t>(c.server_num + c.worker_num))
    return InvalidArgument(fmt::format("topology lists {} nodes, expected {}", t.nodes.size(),
                                       c.server_num + c.worker_num));
  return Status::OK();
}

}  // namespace

ClusterClient::ClusterClient(EventLoop* loop, NodeOptions options, Logger log)
    : loop_(loop), options_(std::move(options)), log_(std::move(log)) {}

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

// Retries every kRetryMillis until the deadline: the scheduler may start after us.
void ClusterClient::TryConnect() {
  Connection::Connect(
      loop_, log_, options_.cluster.sched_host, options_.cluster.sched_port,
      [this](StatusOr<Connection::Ptr> conn) {
        if (conn.ok()) return OnConnected(*conn);
        last_connect_error_ = conn.status();
        if (loop_->IsStopping()) return joined_.Set(conn.status());
        if (loop_->NowMs() >= connect_deadline_ms_) {
          return joined_.Set(Unavailable(fmt::format(
              "cannot reach the scheduler at {} (MS_SCHED_HOST:MS_SCHED_PORT) within {} s: {}",
              SchedulerAddress(), options_.cluster.connect_timeout_s,
              last_connect_error_.message())));
        }
        retry_timer_.RunOnce(kRetryMillis, [this] { TryConnect(); });
      });
}

void ClusterClient::OnConnected(Connection::Ptr conn) {
  scheduler_ = conn;
  conn->Start([this](const Connection::Ptr& c, Incoming&& in) { OnRequest(c, std::move(in)); },
              [this](const Connection::Ptr&, const Status& why) { OnSchedulerLost(why); });
  RegisterRequest req;
  req.node.node_id = options_.node_id;
  req.node.role = options_.role;
  req.node.host = options_.node_host.empty() ? conn->LocalIp() : options_.node_host;
  req.node.port = listen_port_;
  req.server_num = options_.cluster.server_num;
  req.worker_num = options_.cluster.worker_num;
  req.token = options_.cluster.token;
  conn->Call(req, [this](StatusOr<Incoming> reply) {
    if (!reply.ok()) {
      joined_.Set(reply.status().WithContext(
          fmt::format("the scheduler at {} refused this node", SchedulerAddress())));
      return;
    }
    auto* ok = std::get_if<RegisterReply>(&reply->message.body);
    if (ok == nullptr) {
      joined_.Set(InvalidArgument("the scheduler answered RegisterRequest with " +
                                  std::string(MessageName(reply->message.body))));
      return;
    }
    const int count =
        options_.role == Role::kServer ? options_.cluster.server_num : options_.cluster.worker_num;
    if (ok->rank < 0 || ok->rank >= count) {
      joined_.Set(InvalidArgument(fmt::format("the scheduler assigned rank {} in a job of {} {}s",
                                              ok->rank, count, RoleName(options_.role))));
      return;
    }
    rank_ = ok->rank;
    log_->info("registered with the scheduler at {} as {} rank {} (node id {})", SchedulerAddress(),
               RoleName(options_.role), rank_, options_.node_id);
    heartbeat_timer_.RunEvery(Millis(options_.cluster.heartbeat_interval_s), [this] {
      if (scheduler_) scheduler_->Notify(Heartbeat{});
    });
  });
}

void ClusterClient::OnRequest(const Connection::Ptr& conn, Incoming&& in) {
  const uint64_t id = in.message.request_id;
  if (auto* topology = std::get_if<Topology>(&in.message.body)) {
    if (Status st = CheckTopology(*topology, options_.cluster); !st.ok()) {
      conn->Reply(id, ErrorReply{st.message()});
      joined_.Set(st.WithContext("bad topology from the scheduler"));
      return;
    }
    conn->Reply(id, Ack{});
    joined_.Set(*topology);  // later updates (a node re-registered) are acknowledged only
  } else if (std::holds_alternative<Shutdown>(in.message.body)) {
    shutdown_received_ = true;
    conn->Reply(id, Ack{});
    heartbeat_timer_.Stop();
    shutdown_.Set(Status::OK());
  } else {
    conn->Reply(id, ErrorReply{fmt::format("a {} does not handle {} from the scheduler",
                                           RoleName(options_.role), MessageName(in.message.body))});
  }
}

void ClusterClient::OnSchedulerLost(const Status& reason) {
  scheduler_.reset();
  heartbeat_timer_.Stop();
  if (shutdown_received_) return;
  Status lost = Unavailable(fmt::format("lost the connection to the scheduler at {}: {}",
                                        SchedulerAddress(), reason.message()));
  joined_.Set(lost);
  shutdown_.Set(lost);
}

StatusOr<Incoming> ClusterClient::CallScheduler(MessageBody body, const std::string& what) {
  Completion<StatusOr<Incoming>> done;
  bool posted = loop_->Post([this, body = std::move(body), done] {
    if (!scheduler_) return done.Set(Unavailable("not connected to the scheduler"));
    // A lost connection fails the call, so this always completes.
    scheduler_->Call(body, [done](StatusOr<Incoming> reply) { done.Set(std::move(reply)); });
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

Status ClusterClient::ReportDone() { return CallScheduler(Done{}, "report Done").status(); }

Status ClusterClient::WaitForShutdown() { return shutdown_.Wait(); }

}  // namespace pstrain
