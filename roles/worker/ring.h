// WorkerRing: a worker's place in the ring of workers that the collectives
// (comm/collective/collective.h) run on: worker r sends to r+1 and receives from r-1.
//
// Connect() dials worker r+1 (from the topology) and greets it with Hello;
// r+1 answers with its own Hello, which names the shared-memory channel it
// offers (comm/collective/shm_ring.h). If every worker could open its neighbour's
// channel (they agree through a scheduler barrier), the ring runs over
// shared memory; otherwise, or with PSTRAIN_RING_TRANSPORT=tcp, over TCP
// (comm/collective/ring_collective.h). The TCP connections stay either way: their
// closing is how a lost neighbour is noticed.
//
// Threads: Connect() blocks its caller; OnPeerMessage/OnPeerClosed run on
// the node's loop thread, which owns the state below.
#pragma once

#include <memory>

#include "comm/collective/ring_collective.h"
#include "comm/collective/shm_ring.h"

namespace pstrain {

class Node;  // roles/node/node.h

class WorkerRing {
 public:
  explicit WorkerRing(Node* node);
  ~WorkerRing();

  Status Connect(const Topology& topology);
  // A live change of workers (roles/worker/trainer_workers.cc): forgets the
  // ring, closing its connections, so that the new ring's Hellos are taken
  // (held until Connect offers its channel); Connect() then makes the new
  // one, with this worker's rank and count as the cluster client has them.
  Status Drop();
  // After Connect(): the ring's collectives.
  Collective* collective();

  // From the node's peer handlers. OnPeerMessage returns false for a
  // message that is not the ring's (the previous worker's Hello and chunks).
  bool OnPeerMessage(const Connection::Ptr& conn, Incoming& in);
  void OnPeerClosed(const Connection::Ptr& conn, const Status& why);

 private:
  // Makes this worker's inbound shared-memory channel (unless TCP is
  // asked for) and answers a Hello that came before it existed.
  Status OfferSharedMemory(int rank, int world);
  Status ChooseTransport(const Hello& next);
  void Lose(const Status& why);
  // The previous worker's Hello: refused, or taken and answered.
  void AcceptHello(const Connection::Ptr& conn, uint64_t request_id, const Hello& hello);
  void AnswerHello(const Connection::Ptr& conn, uint64_t request_id);

  Node* node_;
  // Loop thread: the rings once made, the previous worker's connection, a
  // Hello held until the offer is ready, and a loss that came before ring_.
  std::unique_ptr<RingCollective> ring_;
  std::unique_ptr<ShmRingCollective> shm_ring_;  // null: TCP (ring_) is used
  Connection::Ptr inbound_, outbound_;
  Connection::Ptr held_hello_conn_;
  uint64_t held_hello_id_ = 0;
  Hello held_hello_;
  bool offer_ready_ = false;
  Status lost_early_;
};

}  // namespace pstrain
