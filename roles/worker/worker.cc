#include "roles/worker/worker.h"

#include <fmt/format.h>

#include <chrono>

#include "comm/transport/completion.h"
#include "roles/node/server_links.h"
#include "roles/placement/server_tables.h"
#include "roles/worker/checkpointing.h"
#include "roles/worker/join_offer.h"

namespace pstrain {

Worker::Worker(NodeOptions options, Logger log, Config config, std::unique_ptr<WorkerJob> job)
    : config_(std::move(config)), job_(std::move(job)), node_(std::move(options), std::move(log)) {}

// The loop stops first: callbacks still pending on it may refer to the KV
// client, which goes before the node. A handle left open is logged by ~Node,
// whose Stop() gets the same error.
Worker::~Worker() {
  // A copy ahead under way ends (its calls have the loop's deadlines)
  // before the loop stops, and none starts after.
  if (rows_ahead_) rows_ahead_->Close();
  node_.loop().Stop().IgnoreError();
}

Status Worker::Run() { return node_.Outcome(RunOnce()); }

Status Worker::RunOnce() {
  rows_ahead_ =
      std::make_unique<RowsAhead>(&node_.loop(), &node_.cluster(), node_.log(), TopologyPatience());
  node_.cluster().SetRequestHandler(
      [this](const Connection::Ptr& conn, uint64_t id, const MessageBody& body) {
        return OnSchedulerRequest(conn, id, body);
      });
  auto topology = node_.Start(
      [this](const Connection::Ptr& c, Incoming&& in) {
        if (ring_.OnPeerMessage(c, in)) return;
        c->Reply(in.message.request_id, ErrorReply{fmt::format("a worker does not handle {}",
                                                               MessageName(in.message.body))});
      },
      [this](const Connection::Ptr& c, const Status& why) { ring_.OnPeerClosed(c, why); });
  if (!topology.ok()) return topology.status();
  PSTRAIN_RETURN_IF_ERROR(ConnectServers(*topology));
  // Checked first: workers with different models may not agree on needing
  // a ring either, and would wait for each other in different barriers.
  // A worker joining a running job live gets the chief's tensors and place
  // at the change's barrier (roles/worker/trainer_workers.cc), where the
  // others rebuild their ring with it.
  const bool joins_live = node_.cluster().joined_live();
  std::vector<TensorSpec> tensors;
  WorkerContext context;
  if (job_) {
    tensors = job_->PsTensors();
    if (joins_live) {
      auto offer = node_.cluster().ShareFromOne(BarrierGroup::kWorkers, "");
      if (!offer.ok()) return offer.status().WithContext("joining the running job");
      auto place = TakeJoinOffer(*offer, tensors, node_.cluster().rank());
      if (!place.ok()) return place.status();
      context.joined_at = std::move(*place);
    } else {
      PSTRAIN_RETURN_IF_ERROR(CheckSameTensors(tensors));
    }
  }
  if (job_ && job_->NeedsCollective()) PSTRAIN_RETURN_IF_ERROR(ring_.Connect(*topology));
  context.rank = node_.cluster().rank();
  context.workers = node_.cluster().worker_num();
  context.config = &config_;
  context.cluster = &node_.cluster();
  context.log = node_.log();
  context.loop = &node_.loop();
  context.servers = servers_;
  context.collective = ring_.collective();
  context.log_dir = node_.options().cluster.log_dir;
  context.sample_log = node_.options().cluster.test_sample_log;
  context.data_cache = data_cache_.get();
  context.drop_ring = [this] { return ring_.Drop(); };
  context.connect_ring = [this]() -> StatusOr<Collective*> {
    auto held = node_.cluster().Held();
    if (!held) return Internal("no topology to rebuild the ring from");
    PSTRAIN_RETURN_IF_ERROR(ring_.Connect(*held));
    return ring_.collective();
  };
  context.rows_ahead = rows_ahead_.get();
  context.use_servers = [this, &context](int servers, const std::vector<int>& slots) {
    PSTRAIN_RETURN_IF_ERROR(UseServers(servers, slots));
    context.servers = node_.loop().Call<std::vector<Connection::Ptr>>(
        [this] { return servers_; }, std::vector<Connection::Ptr>{});
    return Status::OK();
  };
  // With servers there is a KV client even without PS tensors: it also asks
  // the servers for their checkpoint shards (embedding tables). PS tensors
  // without servers fail here, naming why.
  if (job_ && (!servers_.empty() || !tensors.empty())) {
    auto map = PartitionMap::Build(std::move(tensors), static_cast<int>(servers_.size()),
                                   config_.train.partition_bytes);
    if (!map.ok()) return map.status().WithContext("partition map");
    kv_ = std::make_unique<KvClient>(&node_.loop(), servers_, context.rank, std::move(*map));
    context.kv = kv_.get();
    if (config_.train.replication.replicas > 0) {
      kv_->EnableFailover(TopologyPatience());
      auto routes = std::make_shared<ServerRoutes>(context.servers);
      context.routes = routes;
      context.failover_patience = TopologyPatience();
      node_.OnInterrupt([this](const Status& why) {
        if (kv_on_loop_ != nullptr) kv_on_loop_->FailParked(why);
        if (routes_) routes_->Stop();
      });
      node_.loop().Post([this, kv = kv_.get(), routes] {
        kv_on_loop_ = kv;
        routes_ = routes;
        if (server_view_) {
          kv->UseServerView(*server_view_);
          routes->UseOwners(server_view_->owners);
        }
      });
    }
  }
  // The start barrier: every node, servers too, resumes from one step. A
  // worker that joined live starts where the others are.
  if (job_ && !joins_live) {
    auto found = ResumeCheckpoint(config_, node_.log(), node_.cluster().generation() > 0);
    if (!found.ok()) return found.status();
    if (found->step > 0)
      node_.log()->info("resuming at step {} from {}", found->step, found->step_dir);
    context.resume = *found;
  }
  if (!joins_live)
    PSTRAIN_RETURN_IF_ERROR(
        AgreeOnResume(node_.cluster(), context.resume, fmt::format("worker {}", context.rank)));
  if (job_) {
    PSTRAIN_RETURN_IF_ERROR(job_->Run(context));
  } else {
    node_.log()->info(
        "worker rank {} is connected to {} servers; no model is configured, so "
        "there is nothing to train",
        context.rank, servers_.size());
  }
  return node_.Finish();
}

Status Worker::ConnectServers(const Topology& topology) {
  std::vector<NodeInfo> servers;
  for (const NodeInfo& n : topology.nodes)
    if (n.role == Role::kServer) servers.push_back(n);
  servers_.assign(servers.size(), nullptr);
  return ConnectTo(servers);
}

std::chrono::milliseconds Worker::TopologyPatience() {
  return std::chrono::milliseconds(
      2 * static_cast<int64_t>(1000 * node_.options().cluster.heartbeat_timeout_s));
}

Hello Worker::MakeHello() {
  Hello hello;
  hello.node.node_id = node_.options().node_id;
  hello.node.role = Role::kWorker;
  hello.node.rank = node_.cluster().rank();
  hello.generation = node_.cluster().generation();
  return hello;
}

Status Worker::ConnectTo(const std::vector<NodeInfo>& servers) {
  if (servers.empty()) return Status::OK();
  const size_t count = node_.loop().Call<size_t>([this] { return servers_.size(); }, 0);
  auto links = ConnectToServers(&node_.loop(), node_.log(), MakeHello(), servers, count);
  if (!links.ok()) return links.status();
  Completion<Status> kept;
  if (!node_.loop().Post([this, links = std::move(*links), kept] {
        for (size_t r = 0; r < links.size() && r < servers_.size(); ++r)
          if (links[r]) servers_[r] = links[r];
        kept.Set(Status::OK());
      }))
    return Aborted("the worker is stopping");
  return kept.Wait();
}

bool Worker::OnSchedulerRequest(const Connection::Ptr& conn, uint64_t id, const MessageBody& body) {
  if (const auto* view = std::get_if<ServerView>(&body)) {
    // Kept for a client made later; the newest view wins.
    if (!server_view_ || view->view > server_view_->view) server_view_ = *view;
    if (kv_on_loop_ != nullptr) kv_on_loop_->UseServerView(*server_view_);
    if (routes_) routes_->UseOwners(server_view_->owners);
    ReconnectServers(*server_view_);
    conn->Reply(id, Ack{});
    return true;
  }
  const auto* copy = std::get_if<PreCopyRows>(&body);
  if (copy == nullptr) return false;
  auto tables = ServerTables(config_);
  if (node_.cluster().rank() != 0) {
    conn->Reply(id, ErrorReply{"only the chief worker copies table rows ahead"});
  } else if (!tables.ok() || tables->empty()) {
    conn->Reply(id, Ack{});  // nothing to copy: the change moves partitions only
  } else {
    rows_ahead_->Start(*copy, MakeHello(), [conn, id](const Status& st) {
      if (conn->closed()) return;
      // Not copied is no failure: the rows then move whole at the change.
      conn->Reply(id, st.ok() ? MessageBody(Ack{}) : MessageBody(ErrorReply{st.message()}));
    });
  }
  return true;
}

// A live server this worker has no link to (one that joined the running
// job again) is dialed off the loop; its requests go once it answers.
void Worker::ReconnectServers(const ServerView& view) {
  for (int r : view.live) {
    const auto at = static_cast<size_t>(r);
    if (at >= servers_.size() || (servers_[at] && !servers_[at]->closed()) ||
        !reconnecting_.insert(r).second)
      continue;
    reconnect_thread_.Post([this, r] {
      std::vector<NodeInfo> server;
      if (auto held = node_.cluster().Held())
        for (const NodeInfo& n : held->nodes)
          if (n.role == Role::kServer && n.rank == r) server.push_back(n);
      const size_t count = node_.loop().Call<size_t>([this] { return servers_.size(); }, 0);
      auto links = ConnectToServers(&node_.loop(), node_.log(), MakeHello(), server, count);
      node_.loop().Post([this, r, links = std::move(links)] {
        reconnecting_.erase(r);
        if (!links.ok() || static_cast<size_t>(r) >= links->size() ||
            !(*links)[static_cast<size_t>(r)]) {
          node_.log()->warn("could not connect to server {} again: {}", r,
                            links.ok() ? "it is not in the topology" : links.status().message());
          return;
        }
        servers_[static_cast<size_t>(r)] = (*links)[static_cast<size_t>(r)];
        node_.log()->info("connected to server {} again", r);
        if (kv_on_loop_ != nullptr)
          kv_on_loop_->UseServerConnection(r, servers_[static_cast<size_t>(r)]);
        if (routes_) routes_->UseConnection(r, servers_[static_cast<size_t>(r)]);
      });
    });
  }
}

Status Worker::UseServers(int servers, const std::vector<int>& slots) {
  const size_t had = servers_.size();
  if (servers < static_cast<int>(had)) {
    // Nothing is routed to the leavers any more (UsePlacement came first):
    // their connections close before they go. Those that stay take the
    // ranks of their slots.
    Completion<Status> dropped;
    if (!node_.loop().Post([this, servers, slots, dropped] {
          std::vector<Connection::Ptr> kept(static_cast<size_t>(servers));
          std::vector<bool> stays(servers_.size(), false);
          for (size_t s = 0; s < kept.size(); ++s) {
            const size_t from = slots.empty() ? s : static_cast<size_t>(slots[s]);
            kept[s] = servers_[from];
            stays[from] = true;
          }
          for (size_t r = 0; r < servers_.size(); ++r)
            if (!stays[r] && servers_[r])
              servers_[r]->Close(Cancelled("the server leaves the job"));
          servers_ = std::move(kept);
          dropped.Set(Status::OK());
        }))
      return Aborted("the worker is stopping");
    PSTRAIN_RETURN_IF_ERROR(dropped.Wait());
    return kv_ ? kv_->UseServers(servers_) : Status::OK();
  }
  if (servers == static_cast<int>(had)) return Status::OK();
  auto listed = AwaitServers(&node_.cluster(), static_cast<int>(had), servers, TopologyPatience());
  if (!listed.ok()) return listed.status();
  const std::vector<NodeInfo>& joined = *listed;
  // Sized on the loop, which the connections' callbacks fill in.
  Completion<Status> sized;
  if (!node_.loop().Post([this, servers, sized] {
        servers_.resize(static_cast<size_t>(servers));
        sized.Set(Status::OK());
      }))
    return Aborted("the worker is stopping");
  PSTRAIN_RETURN_IF_ERROR(sized.Wait());
  PSTRAIN_RETURN_IF_ERROR(ConnectTo(joined));
  node_.log()->info("worker rank {} connected to {} more servers (now {})", node_.cluster().rank(),
                    joined.size(), servers);
  return kv_ ? kv_->UseServers(servers_) : Status::OK();
}

Status Worker::CheckSameTensors(const std::vector<TensorSpec>& tensors) {
  if (node_.cluster().worker_num() == 1) return Status::OK();
  const int rank = node_.cluster().rank();
  const std::string mine = DescribeTensors(tensors);
  auto chiefs = node_.cluster().ShareFromOne(BarrierGroup::kWorkers, rank == 0 ? mine : "");
  if (!chiefs.ok()) return chiefs.status().WithContext("comparing models with worker 0");
  if (*chiefs != mine)
    return FailedPrecondition(fmt::format(
        "worker {} has other PS tensors ({}) than worker 0 ({}): every worker must run the same "
        "model and parameters: rules",
        rank, mine, *chiefs));
  return Status::OK();
}

}  // namespace pstrain
