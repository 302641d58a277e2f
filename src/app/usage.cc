#include "src/app/usage.h"

namespace pstrain {

const char* UsageText() {
  return R"(pstrain: a parameter-server trainer for neural networks.

Usage:
  pstrain [flags]            run one node; its role comes from MS_ROLE (or --role)
  pstrain local [flags]      run a whole job (scheduler, servers, workers) on this
                             machine as threads of one process
  pstrain bench kv|allreduce|embedding|train ...
                             benchmarks, one JSON line per case (see README)
  pstrain gen criteo --rows N --shards K --out DIR [--test-rows M] [--seed S]
                             synthetic Criteo-format click data with a planted
                             model; prints the best reachable AUC
  pstrain --help             this text
  pstrain --version          the version

Roles (MS_ROLE / --role):
  MS_SCHED                 the scheduler: nodes register with it, it assigns ranks
                           (servers and workers each from 0), wires the topology,
                           runs barriers, watches heartbeats and ends the job
  MS_PSERVER (MS_SERVER)   a parameter server: holds a shard of the PS-managed weights
  MS_WORKER                a worker: computes gradients, pushes and pulls weights,
                           all-reduces the ps: false ones with the other workers

Environment (a flag of the same meaning overrides the variable):
  MS_ROLE          --role            MS_SCHED | MS_PSERVER | MS_SERVER | MS_WORKER
  MS_SERVER_NUM    --servers         number of servers in the job (0..4096)
  MS_WORKER_NUM    --workers         number of workers in the job (1..4096)
  MS_SCHED_HOST    --sched-host      address the scheduler listens on (and nodes dial)
  MS_SCHED_PORT    --sched-port      port of the scheduler (1..65535)
  MS_NODE_ID       --node-id         stable identity: a node that comes back with the
                                     same id gets its old rank (default: a random id)
  MS_NODE_RANK     --rank            the rank to ask for (a server's below MS_SERVER_NUM,
                                     a worker's below MS_WORKER_NUM); a rank another node
                                     holds is refused (default: the scheduler picks)
  MS_NODE_HOST     --node-host       address this node advertises to its peers
                                     (default: the address it reaches the scheduler from)
  MS_CLUSTER_TOKEN --token           shared secret, proved on every connection by
                                     HMAC challenge and response (never sent); a peer
                                     with another token or none is refused
  PSTRAIN_NODE_PORT          --node-port          port this node listens on (default: any)
  PSTRAIN_HEARTBEAT_INTERVAL --heartbeat-interval seconds between heartbeats (default 1)
  PSTRAIN_HEARTBEAT_TIMEOUT  --heartbeat-timeout  a node silent this long is logged and
                                                  ends the job (default 30)
  PSTRAIN_CONNECT_TIMEOUT    --connect-timeout    how long a node keeps trying to reach
                                                  the scheduler (default 60)
  PSTRAIN_RING_TRANSPORT     --ring-transport     the workers' all-reduce ring: auto
                                                  (shared memory on one host, else
                                                  TCP; default) or tcp
  PSTRAIN_TLS_CERT           --tls-cert           this node's certificate (PEM); with the
  PSTRAIN_TLS_KEY            --tls-key            key and the CA, every connection is
  PSTRAIN_TLS_CA             --tls-ca             mutual TLS 1.3 (all three or none)
  PSTRAIN_HANDSHAKE_TIMEOUT  --handshake-timeout  a connection not authenticated this
                                                  many seconds after it opened is
                                                  closed (default 10)
  PSTRAIN_MAX_HANDSHAKING    --max-handshaking    accepted connections still in their
                                                  handshake at once (default 64)
  PSTRAIN_FRAME_STALL_TIMEOUT --frame-stall-timeout a frame begun that receives no byte
                                                  this many seconds is dropped with its
                                                  connection (default 60)
  PSTRAIN_MAX_QUEUED_BYTES   --max-queued-bytes   bytes queued unsent to one peer before
                                                  its connection is closed (default 4 GiB)
  PSTRAIN_CONFIG             --config             the job's YAML config

`pstrain local` takes --servers, --workers (default 2 and 2), --config and the
heartbeat flags; it needs no MS_* variable. With a config that has a model:
section, the workers train it (configs/ has ready ones); without one they
only join the job and leave.

Exit status: 0 finished; 1 failed while running; 2 bad command line or environment.

Scheduler log lines (stable, for grep):
  The server node id:<id>,node ip: <ip>,node port:<port> assign rank id:<r>
  The worker node id:<id>,node ip: <ip>,node port:<port> assign rank id:<r>
  Start the scheduler node is successful!
)";
}

}  // namespace pstrain
