#include "roles/worker/ring.h"

#include <fmt/format.h>

#include <utility>

#include "comm/transport/patient_connect.h"
#include "roles/node/node.h"
#include "roles/node/peers.h"

namespace pstrain {

WorkerRing::WorkerRing(Node* node) : node_(node) {}

WorkerRing::~WorkerRing() = default;

Collective* WorkerRing::collective() {
  if (shm_ring_) return shm_ring_.get();
  return ring_.get();
}

Status WorkerRing::Connect(const Topology& topology) {
  const int rank = node_->cluster().rank(), world = node_->cluster().worker_num();
  if (world == 1) {
    ring_ = std::make_unique<RingCollective>(&node_->loop(), 0, 1, nullptr);
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
  hello.node.node_id = node_->options().node_id;
  hello.node.role = Role::kWorker;
  hello.node.rank = rank;
  hello.generation = node_->cluster().generation();
  Completion<StatusOr<Hello>> connected;
  EventLoop* loop = &node_->loop();
  bool posted = loop->Post([this, loop, host = peer->host, port = peer->port, who, hello, rank,
                            world, next, connected] {
    ConnectPatiently(
        loop, node_->log(), host, port, PeerConnectPatienceMs(*loop),
        [this, loop, who, hello, rank, world, next, connected](StatusOr<Connection::Ptr> conn) {
          if (!conn.ok()) return connected.Set(conn.status().WithContext(who));
          ring_ = std::make_unique<RingCollective>(loop, rank, world, *conn);
          outbound_ = *conn;
          if (!lost_early_.ok()) Lose(lost_early_);
          (*conn)->Start(nullptr, [this, next](const Connection::Ptr& c, const Status& why) {
            if (c != outbound_) return;  // a ring dropped since
            Lose(
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
  return ChooseTransport(*answer);
}

// Before dialing: makes this worker's inbound shared-memory channel, and
// answers a previous worker's Hello that came before it existed.
Status WorkerRing::OfferSharedMemory(int rank, int world) {
  std::unique_ptr<ShmRingCollective> offer;
  if (node_->options().cluster.ring_transport == "auto") {
    auto shm = ShmRingCollective::Create(rank, world);
    if (shm.ok()) {
      offer = std::move(*shm);
    } else {
      node_->log()->warn("ring: no shared memory ({}); the workers use TCP",
                         shm.status().message());
    }
  }
  return node_->loop().Call<Status>(
      [&] {
        shm_ring_ = std::move(offer);
        offer_ready_ = true;
        if (held_hello_conn_) AcceptHello(held_hello_conn_, held_hello_id_, held_hello_);
        held_hello_conn_ = nullptr;
        return Status::OK();
      },
      Aborted("the worker is stopping"));
}

// Shared memory only if every worker reached its neighbour's channel (all
// on one host, none with PSTRAIN_RING_TRANSPORT=tcp); else TCP for all.
Status WorkerRing::ChooseTransport(const Hello& next) {
  bool opened = false;
  if (shm_ring_ && !next.shm_name.empty()) {
    Status st = shm_ring_->ConnectNext(next.shm_name, next.shm_nonce);
    opened = st.ok();
    if (!opened)
      node_->log()->info("ring: no shared memory with the next worker: {}", st.message());
  }
  auto all = node_->cluster().AgreeMin(BarrierGroup::kWorkers, opened ? 1 : 0);
  if (!all.ok()) return all.status().WithContext("choosing the ring's transport");
  EventLoop& loop = node_->loop();
  return loop.Call<Status>(
      [&] {
        if (shm_ring_) shm_ring_->InboundOpened();  // every neighbour is past opening it
        if (*all == 1) {
          node_->log()->info("ring: the {} workers share this host: shared memory",
                             node_->cluster().worker_num());
        } else {
          node_->log()->info("ring: TCP among the workers");
          shm_ring_.reset();
        }
        return Status::OK();
      },
      Aborted("the worker is stopping"));
}

void WorkerRing::Lose(const Status& why) {
  if (ring_) ring_->OnPeerLost(why);
  if (shm_ring_) shm_ring_->SetLost(why);
}

void WorkerRing::AnswerHello(const Connection::Ptr& conn, uint64_t request_id) {
  Hello mine;
  mine.node.node_id = node_->options().node_id;
  mine.node.role = Role::kWorker;
  mine.node.rank = node_->cluster().rank();
  if (shm_ring_) {
    mine.shm_name = shm_ring_->inbound_name();
    mine.shm_nonce = shm_ring_->inbound_nonce();
  }
  conn->Reply(request_id, mine);
}

bool WorkerRing::OnPeerMessage(const Connection::Ptr& conn, Incoming& in) {
  if (auto* chunk = std::get_if<RingChunk>(&in.message.body)) {
    if (conn != inbound_ || !ring_) {
      conn->Close(InvalidArgument("a ring chunk from a peer that is not the ring's"));
    } else {
      ring_->OnChunk(*chunk, std::move(in.payload));
    }
    return true;
  }
  if (auto* hello = std::get_if<Hello>(&in.message.body)) {
    // With shared memory to offer, the answer names it; it may not exist
    // yet (this worker is still connecting to servers, or learning its rank
    // in a live change of workers): checked and answered then.
    if (!offer_ready_) {
      if (held_hello_conn_)
        held_hello_conn_->Reply(held_hello_id_, ErrorReply{"another Hello came for this ring"});
      held_hello_conn_ = conn;
      held_hello_id_ = in.message.request_id;
      held_hello_ = *hello;
    } else {
      AcceptHello(conn, in.message.request_id, *hello);
    }
    return true;
  }
  return false;
}

void WorkerRing::AcceptHello(const Connection::Ptr& conn, uint64_t request_id, const Hello& hello) {
  const int world = node_->cluster().worker_num();
  const int prev = (node_->cluster().rank() + world - 1) % world;
  std::string refusal;
  if (hello.node.role != Role::kWorker || hello.node.rank != prev)
    refusal = fmt::format("worker rank {} takes ring chunks from worker rank {} only",
                          node_->cluster().rank(), prev);
  else if (inbound_ && !inbound_->closed())
    refusal = fmt::format("worker rank {} is already connected to this ring", prev);
  else
    refusal = StaleHello(hello, node_->cluster().generation());
  if (!refusal.empty()) return conn->Reply(request_id, ErrorReply{refusal});
  inbound_ = conn;
  // Its ring segments go where the ring says (straight into the tensor
  // when kept as they come).
  conn->SetRequestPlacer([this](const Connection::Ptr& from, const Message& m, uint64_t size) {
    auto* chunk = std::get_if<RingChunk>(&m.body);
    if (chunk == nullptr || from != inbound_ || !ring_) return Buffer{};
    return ring_->PlaceChunk(from, *chunk, size);
  });
  AnswerHello(conn, request_id);
}

Status WorkerRing::Drop() {
  return node_->loop().Call<Status>(
      [&] {
        for (Connection::Ptr* c : {&outbound_, &inbound_})
          if (Connection::Ptr conn = std::exchange(*c, nullptr))
            conn->Close(Cancelled("the workers' ring is rebuilt"));
        ring_.reset();
        shm_ring_.reset();
        offer_ready_ = false;
        lost_early_ = Status::OK();
        return Status::OK();
      },
      Aborted("the worker is stopping"));
}

void WorkerRing::OnPeerClosed(const Connection::Ptr& conn, const Status& why) {
  if (conn != inbound_) return;
  const int world = node_->cluster().worker_num();
  const int prev = (node_->cluster().rank() + world - 1) % world;
  Status lost = Unavailable(fmt::format("ring rank {} (worker) is gone: {}", prev, why.message()));
  if (ring_) {
    Lose(lost);
  } else {
    lost_early_ = lost;
  }
}

}  // namespace pstrain
