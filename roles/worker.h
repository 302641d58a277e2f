// Worker: joins the job, connects to every server, builds the partition map
// and the KV client from its job's PS tensors, passes the start barrier with
// the rest of the job, runs the job (roles/worker_job.h) and reports Done.
// Without a job it only does the handshake.
#pragma once

#include <memory>
#include <vector>

#include "comm/kv_client.h"
#include "comm/ring_collective.h"
#include "comm/shm_ring.h"
#include "roles/node.h"
#include "roles/worker_job.h"
#include "src/common/config.h"

namespace pstrain {

class Worker {
 public:
  Worker(NodeOptions options, Logger log, Config config = {},
         std::unique_ptr<WorkerJob> job = nullptr);
  ~Worker();
  // Runs the worker's part of the job; blocks until it is over.
  Status Run();

 private:
  // Connects to every server of `topology` and greets it. Blocking.
  Status ConnectServers(const Topology& topology);
  // Every worker compares its PS tensors with worker 0's (through the
  // scheduler): with different models, a pull could wait for a partition
  // nobody creates. Blocking; a barrier of the workers.
  Status CheckSameTensors(const std::vector<TensorSpec>& tensors);
  // Dials the next worker of the ring (rank + 1) and makes ring_, or
  // shm_ring_ when every worker shares this host. Blocking.
  Status ConnectRing(const Topology& topology);
  Status OfferSharedMemory(int rank, int world);
  Status ChooseRingTransport(const Hello& next);
  // Loop thread.
  void LoseRing(const Status& why);
  void AnswerRingHello(const Connection::Ptr& conn, uint64_t request_id);
  // Loop thread: a peer's message and a peer's closed connection. Workers
  // take only the ring's: the previous worker's Hello and its chunks.
  void OnPeerMessage(const Connection::Ptr& conn, Incoming&& in);
  void OnPeerClosed(const Connection::Ptr& conn, const Status& why);

  Config config_;
  std::unique_ptr<WorkerJob> job_;
  Node node_;
  std::vector<Connection::Ptr> servers_;  // by server rank
  std::unique_ptr<KvClient> kv_;
  // The ring among workers. Loop thread: ring_ once made, ring_inbound_ (the
  // previous worker's connection) and a loss that came before ring_ did.
  std::unique_ptr<RingCollective> ring_;
  std::unique_ptr<ShmRingCollective> shm_ring_;  // null: TCP (ring_) is used
  Connection::Ptr ring_inbound_;
  Connection::Ptr held_hello_conn_;  // the previous worker's Hello, before shm_ring_
  uint64_t held_hello_id_ = 0;
  bool ring_offer_ready_ = false;  // shm_ring_ made (or not): Hellos are answered
  Status ring_lost_early_;
};

}  // namespace pstrain
