#include "roles/node/node.h"

#include <fmt/format.h>

#include "comm/transport/address.h"
#include "comm/transport/tls.h"
#include "src/common/open_files.h"

namespace pstrain {

Node::Node(NodeOptions options, Logger log)
    : options_(std::move(options)),
      log_(std::move(log)),
      listener_(&loop_, log_),
      cluster_(&loop_, options_, log_) {
  cluster_.SetInterruptHook([this](const Status& why) {
    CloseAllConnections(&loop_, why);
    if (on_interrupt_) on_interrupt_(why);
  });
  loop_.SetTestFault(options_.cluster.test_fault);
  loop_.SetSecurity(SecurityFrom(options_.cluster));
}

void Node::OnInterrupt(std::function<void(const Status&)> hook) {
  loop_.Post([this, hook = std::move(hook)]() mutable { on_interrupt_ = std::move(hook); });
}

Node::~Node() {
  const Status stopped = loop_.Stop();
  if (!stopped.ok()) log_->error("stopping the node: {}", stopped.message());
}

// The node port listens only where peers are told to connect: the address
// advertised (MS_NODE_HOST, else the one this host reaches the scheduler
// from), unless PSTRAIN_BIND_HOST says otherwise. A route that cannot be
// found yet (a scheduler name not resolvable yet) falls back to every
// interface, saying so.
std::string Node::BindHost() const {
  if (!options_.bind_host.empty()) return options_.bind_host;
  if (!options_.node_host.empty()) return options_.node_host;
  auto local = LocalAddressToward(options_.cluster.sched_host, options_.cluster.sched_port);
  if (local.ok()) return *local;
  log_->warn("listening on every interface: no address toward the scheduler: {}",
             local.status().message());
  return "0.0.0.0";
}

StatusOr<Topology> Node::Start(RequestHandler on_peer_request, CloseHandler on_peer_closed) {
  // A server holds a connection per worker; a worker one per server and its
  // ring neighbours. Said before the job starts, not as refused connections
  // in the middle of it.
  const ClusterOptions& c = options_.cluster;
  PSTRAIN_RETURN_IF_ERROR(
      options_.role == Role::kServer
          ? CheckOpenFileLimit(c.worker_num + kSpareDescriptors,
                               fmt::format("a server of {} workers", c.worker_num))
          : CheckOpenFileLimit(c.server_num + 2 + kSpareDescriptors,
                               fmt::format("a worker of {} servers", c.server_num)));
  auto tls = TlsContext::LoadIfSet(options_.cluster.tls);
  if (!tls.ok()) return tls.status();
  loop_.set_tls(std::move(*tls));
  PSTRAIN_RETURN_IF_ERROR(loop_.Start());
  loop_.Post([this] {
    signals_.Watch([this](const char* name) {
      if (options_.cluster.elastic.enabled()) {
        log_->warn(
            "{} received: this {} leaves the elastic job at a step every worker reaches (the "
            "job stops instead if that would take it below its minimum); send it again to exit "
            "at once",
            name, RoleName(options_.role));
      } else {
        log_->warn(
            "{} received: stopping the job cleanly at a step every worker reaches (with a "
            "checkpoint when train.checkpoint is set); send it again to exit at once",
            name);
      }
      cluster_.RequestStop(
          fmt::format("{} to {} node id:{}", name, RoleName(options_.role), options_.node_id));
    });
  });
  const std::string bind = BindHost();
  // A node rolled back listens where it did, so that its peers' topologies
  // need not change (roles/node/peers.h); if another process took the port
  // meanwhile, anywhere, and the scheduler tells its peers.
  uint16_t want = options_.node_port;
  if (want == 0 && recalled_port_ != 0) {
    if (CanListenOn(bind, recalled_port_)) {
      want = recalled_port_;
    } else {
      log_->warn("port {} this node listened on before is taken: listening on another",
                 recalled_port_);
    }
  }
  auto port = loop_.Call<StatusOr<uint16_t>>(
      [&]() -> StatusOr<uint16_t> {
        return listener_.Listen(
            bind, want, [this, on_peer_request, on_peer_closed](Connection::Ptr c) {
              c->Start(on_peer_request,
                       [this, on_peer_closed](const Connection::Ptr& conn, const Status& why) {
                         if (why.code() != StatusCode::kAborted)
                           log_->debug("peer {} disconnected: {}", conn->peer(), why.message());
                         if (on_peer_closed) on_peer_closed(conn, why);
                       });
            });
      },
      Aborted("node stopped while starting"));
  if (!port.ok()) return port.status();
  port_ = *port;
  auto topology = cluster_.Join(*port);
  if (!topology.ok()) return topology.status();
  SetLogLabel(log_, fmt::format("{} {}", RoleName(options_.role), cluster_.rank()));
  log_->info("{} rank {} joined a job of {} servers and {} workers", RoleName(options_.role),
             cluster_.rank(), cluster_.server_num(), cluster_.worker_num());
  return topology;
}

void Node::Recall(NodeMemory memory) {
  recalled_port_ = memory.port;
  if (memory.topology) cluster_.Recall(std::move(*memory.topology));
}

NodeMemory Node::Kept() {
  NodeMemory kept{cluster_.Held(), port_.load()};
  if (auto next = cluster_.next_run()) {
    kept.rank = next->rank;
    kept.server_num = next->server_num;
    kept.worker_num = next->worker_num;
  }
  return kept;
}

Status Node::Outcome(const Status& run) {
  if (run.ok()) return run;
  // The scheduler hears of a closed connection at once and of a silent node
  // within the heartbeat timeout, before this node's calls to it expire
  // (twice that): a verdict on a lost peer comes within moments.
  const bool lost_peer =
      run.code() == StatusCode::kUnavailable || run.code() == StatusCode::kDeadlineExceeded;
  if (auto verdict = cluster_.WaitForVerdict(lost_peer ? 2.0 : 0.0)) {
    if (!verdict->ok()) return *verdict;
  }
  // No verdict: the scheduler knows nothing of it (a connection between two
  // live nodes broke) or this node failed on its own. Tell it, and take its
  // answer: a rollback, or the end of the job.
  cluster_.ReportFailure(run, lost_peer, lost_peer ? LostPeer() : std::nullopt);
  if (lost_peer && options_.cluster.recovery_wait_s > 0) {
    if (auto verdict = cluster_.WaitForVerdict(options_.cluster.heartbeat_timeout_s)) {
      if (!verdict->ok()) return *verdict;
    }
  }
  return run;
}

std::optional<NodeInfo> Node::LostPeer() {
  const std::vector<std::string> failed = loop_.failed_peers();
  if (failed.empty()) return std::nullopt;
  return loop_.Call<std::optional<NodeInfo>>(
      [&]() -> std::optional<NodeInfo> {
        const Topology* topology = cluster_.topology();
        if (topology == nullptr) return std::nullopt;
        for (const std::string& peer : failed)
          for (const NodeInfo& n : topology->nodes)
            if (n.role != Role::kScheduler && fmt::format("{}:{}", n.host, n.port) == peer)
              return n;
        return std::nullopt;
      },
      std::nullopt);
}

Status Node::Finish(const std::function<void()>& at_end) {
  if (options_.role == Role::kWorker) PSTRAIN_RETURN_IF_ERROR(cluster_.ReportDone());
  PSTRAIN_RETURN_IF_ERROR(cluster_.WaitForShutdown());
  if (at_end) at_end();
  PSTRAIN_RETURN_IF_ERROR(loop_.Stop());
  log_->info("{} rank {} stops: the job is over", RoleName(options_.role), cluster_.rank());
  return Status::OK();
}

}  // namespace pstrain
