#include "roles/worker.h"

#include <fmt/format.h>

#include "src/common/random.h"

namespace pstrain {

Worker::Worker(NodeOptions options, Logger log, Config config, std::unique_ptr<WorkerJob> job)
    : config_(std::move(config)), job_(std::move(job)), node_(std::move(options), std::move(log)) {}

// The loop stops first: callbacks still pending on it may refer to the KV
// client, which goes before the node.
Worker::~Worker() { (void)node_.loop().Stop(); }

Status Worker::Run() {
  auto topology = node_.Start(
      [this](const Connection::Ptr& c, Incoming&& in) { OnPeerMessage(c, std::move(in)); },
      [this](const Connection::Ptr& c, const Status& why) { OnPeerClosed(c, why); });
  if (!topology.ok()) return topology.status();
  PSTRAIN_RETURN_IF_ERROR(ConnectServers(*topology));
  // Checked first: workers with different models may not agree on needing
  // a ring either, and would wait for each other in different barriers.
  std::vector<TensorSpec> tensors;
  if (job_) {
    tensors = job_->PsTensors();
    PSTRAIN_RETURN_IF_ERROR(CheckSameTensors(tensors));
  }
  if (job_ && job_->NeedsCollective()) PSTRAIN_RETURN_IF_ERROR(ConnectRing(*topology));
  WorkerContext context;
  context.rank = node_.cluster().rank();
  context.workers = node_.options().cluster.worker_num;
  context.config = &config_;
  context.cluster = &node_.cluster();
  context.log = node_.log();
  context.loop = &node_.loop();
  context.servers = servers_;
  context.collective = shm_ring_ ? static_cast<Collective*>(shm_ring_.get()) : ring_.get();
  if (job_) {
    if (!tensors.empty()) {
      auto map = PartitionMap::Build(std::move(tensors), static_cast<int>(servers_.size()),
                                     config_.train.partition_bytes);
      if (!map.ok()) return map.status().WithContext("partition map");
      kv_ = std::make_unique<KvClient>(&node_.loop(), servers_, context.rank, std::move(*map));
      context.kv = kv_.get();
    }
  }
  PSTRAIN_RETURN_IF_ERROR(node_.cluster().Barrier(BarrierGroup::kAll));
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
  Completion<Status> all_connected;
  auto remaining = std::make_shared<size_t>(servers.size());
  if (servers.empty()) return Status::OK();
  Hello hello;
  hello.node.node_id = node_.options().node_id;
  hello.node.role = Role::kWorker;
  hello.node.rank = node_.cluster().rank();
  bool posted = node_.loop().Post([this, servers, hello, all_connected, remaining] {
    for (const NodeInfo& s : servers) {
      std::string who = fmt::format("server rank {} at {}:{}", s.rank, s.host, s.port);
      Connection::Connect(
          &node_.loop(), node_.log(), s.host, s.port,
          [this, s, who, hello, all_connected, remaining](StatusOr<Connection::Ptr> conn) {
            if (!conn.ok()) return all_connected.Set(conn.status().WithContext(who));
            servers_[s.rank] = *conn;
            (*conn)->Start(nullptr, nullptr);
            (*conn)->Call(hello, [who, all_connected, remaining](StatusOr<Incoming> reply) {
              if (!reply.ok()) return all_connected.Set(reply.status().WithContext(who));
              if (--*remaining == 0) all_connected.Set(Status::OK());
            });
          });
    }
  });
  if (!posted) return Aborted("the worker is stopping");
  return all_connected.Wait();
}

Status Worker::ConnectRing(const Topology& topology) {
  const int rank = node_.cluster().rank(), world = node_.options().cluster.worker_num;
  if (world == 1) {
    ring_ = std::make_unique<RingCollective>(&node_.loop(), 0, 1, nullptr);
    return Status::OK();
  }
  PSTRAIN_RETURN_IF_ERROR(OfferSharedMemory(rank, world));
  const int next = (rank + 1) % world;
  const NodeInfo* peer = nullptr;
  for (const NodeInfo& n : topology.nodes)
    if (n.role == Role::kWorker && n.rank == next) peer = &n;
  if (peer == nullptr)
    return Internal(fmt::format("the topology has no worker of rank {} for the ring", next));
  const std::string who =
      fmt::format("ring: worker rank {} at {}:{}", next, peer->host, peer->port);
  Hello hello;
  hello.node.node_id = node_.options().node_id;
  hello.node.role = Role::kWorker;
  hello.node.rank = rank;
  Completion<StatusOr<Hello>> connected;
  EventLoop* loop = &node_.loop();
  bool posted = loop->Post([this, loop, host = peer->host, port = peer->port, who, hello, rank,
                            world, next, connected] {
    Connection::Connect(
        loop, node_.log(), host, port,
        [this, loop, who, hello, rank, world, next, connected](StatusOr<Connection::Ptr> conn) {
          if (!conn.ok()) return connected.Set(conn.status().WithContext(who));
          ring_ = std::make_unique<RingCollective>(loop, rank, world, *conn);
          if (!ring_lost_early_.ok()) LoseRing(ring_lost_early_);
          (*conn)->Start(nullptr, [this, next](const Connection::Ptr&, const Status& why) {
            LoseRing(
                Unavailable(fmt::format("ring rank {} (worker) is gone: {}", next, why.message())));
          });
          (*conn)->Call(hello, [who, connected](StatusOr<Incoming> reply) {
            if (!reply.ok()) return connected.Set(reply.status().WithContext(who));
            if (auto* error = std::get_if<ErrorReply>(&reply->message.body))
              return connected.Set(FailedPrecondition(fmt::format("{}: {}", who, error->message)));
            auto* answer = std::get_if<Hello>(&reply->message.body);
            connected.Set(answer != nullptr ? *answer : Hello{});
          });
        });
  });
  if (!posted) return Aborted("the worker is stopping");
  auto answer = connected.Wait();
  if (!answer.ok()) return answer.status();
  return ChooseRingTransport(*answer);
}

// Before dialing: makes this worker's inbound shared-memory channel, and
// answers a previous worker's Hello that came before it existed.
Status Worker::OfferSharedMemory(int rank, int world) {
  std::unique_ptr<ShmRingCollective> offer;
  if (node_.options().cluster.ring_transport == "auto") {
    auto shm = ShmRingCollective::Create(rank, world);
    if (shm.ok()) {
      offer = std::move(*shm);
    } else {
      node_.log()->warn("ring: no shared memory ({}); the workers use TCP", shm.status().message());
    }
  }
  return node_.loop().Call<Status>(
      [&] {
        shm_ring_ = std::move(offer);
        ring_offer_ready_ = true;
        if (held_hello_conn_) AnswerRingHello(held_hello_conn_, held_hello_id_);
        held_hello_conn_ = nullptr;
        return Status::OK();
      },
      Aborted("the worker is stopping"));
}

// Shared memory only if every worker reached its neighbour's channel (all
// on one host, none with PSTRAIN_RING_TRANSPORT=tcp); else TCP for all.
Status Worker::ChooseRingTransport(const Hello& next) {
  bool opened = false;
  if (shm_ring_ && !next.shm_name.empty()) {
    Status st = shm_ring_->ConnectNext(next.shm_name, next.shm_nonce);
    opened = st.ok();
    if (!opened) node_.log()->info("ring: no shared memory with the next worker: {}", st.message());
  }
  auto all = node_.cluster().AgreeMin(BarrierGroup::kWorkers, opened ? 1 : 0);
  if (!all.ok()) return all.status().WithContext("choosing the ring's transport");
  EventLoop& loop = node_.loop();
  return loop.Call<Status>(
      [&] {
        if (shm_ring_) shm_ring_->InboundOpened();  // every neighbour is past opening it
        if (*all == 1) {
          node_.log()->info("ring: the {} workers share this host: shared memory",
                            node_.options().cluster.worker_num);
        } else {
          node_.log()->info("ring: TCP among the workers");
          shm_ring_.reset();
        }
        return Status::OK();
      },
      Aborted("the worker is stopping"));
}

void Worker::LoseRing(const Status& why) {
  if (ring_) ring_->OnPeerLost(why);
  if (shm_ring_) shm_ring_->SetLost(why);
}

void Worker::AnswerRingHello(const Connection::Ptr& conn, uint64_t request_id) {
  Hello mine;
  mine.node.node_id = node_.options().node_id;
  mine.node.role = Role::kWorker;
  mine.node.rank = node_.cluster().rank();
  if (shm_ring_) {
    mine.shm_name = shm_ring_->inbound_name();
    mine.shm_nonce = shm_ring_->inbound_nonce();
  }
  conn->Reply(request_id, mine);
}

void Worker::OnPeerMessage(const Connection::Ptr& conn, Incoming&& in) {
  const int world = node_.options().cluster.worker_num;
  const int prev = (node_.cluster().rank() + world - 1) % world;
  if (auto* chunk = std::get_if<RingChunk>(&in.message.body)) {
    if (conn != ring_inbound_ || !ring_)
      return conn->Close(InvalidArgument("a ring chunk from a peer that is not the ring's"));
    return ring_->OnChunk(*chunk, std::move(in.payload));
  }
  if (auto* hello = std::get_if<Hello>(&in.message.body)) {
    std::string refusal;
    if (hello->node.role != Role::kWorker || hello->node.rank != prev)
      refusal = fmt::format("worker rank {} takes ring chunks from worker rank {} only",
                            node_.cluster().rank(), prev);
    else if (ring_inbound_ && !ring_inbound_->closed())
      refusal = fmt::format("worker rank {} is already connected to this ring", prev);
    if (!refusal.empty()) return conn->Reply(in.message.request_id, ErrorReply{refusal});
    ring_inbound_ = conn;
    // With shared memory to offer, the answer names it; it may not exist
    // yet (this worker is still connecting to servers): answered then.
    if (!ring_offer_ready_) {
      held_hello_conn_ = conn;
      held_hello_id_ = in.message.request_id;
      return;
    }
    return AnswerRingHello(conn, in.message.request_id);
  }
  conn->Reply(in.message.request_id,
              ErrorReply{fmt::format("a worker does not handle {}", MessageName(in.message.body))});
}

void Worker::OnPeerClosed(const Connection::Ptr& conn, const Status& why) {
  if (conn != ring_inbound_) return;
  const int world = node_.options().cluster.worker_num;
  const int prev = (node_.cluster().rank() + world - 1) % world;
  Status lost = Unavailable(fmt::format("ring rank {} (worker) is gone: {}", prev, why.message()));
  if (ring_) {
    LoseRing(lost);
  } else {
    ring_lost_early_ = lost;
  }
}

namespace {

// "3 tensors, 1200 floats, fingerprint 0123456789abcdef": equal for equal
// lists (names, sizes and order).
std::string DescribeTensors(const std::vector<TensorSpec>& tensors) {
  uint64_t fingerprint = 0;
  int64_t floats = 0;
  for (const TensorSpec& t : tensors) {
    fingerprint = Mix64(fingerprint ^ HashString(t.name)) ^ static_cast<uint64_t>(t.elements);
    floats += t.elements;
  }
  return fmt::format("{} tensors, {} floats, fingerprint {:016x}", tensors.size(), floats,
                     fingerprint);
}

}  // namespace

Status Worker::CheckSameTensors(const std::vector<TensorSpec>& tensors) {
  if (node_.options().cluster.worker_num == 1) return Status::OK();
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
