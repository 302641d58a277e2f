// ConnectPatiently: Connection::Connect to a peer of the same job, tried
// again while it fails for a reason that may pass, so that a busy peer
// delays a node instead of ending its job.
//
// Retried: Unavailable, the code of a connect refused or reset, and of a
// connection the peer closed during its handshake (a server whose handshake
// slots are full at the moment hundreds of workers dial it, or one whose
// process is out of descriptors for a moment). Not retried: a refusal
// (PermissionDenied: a wrong token or certificate) or a stopping loop
// (Aborted). The waits double from 20 ms to 1 s, and the last try begins
// before `patience_ms` have passed since the first; after it, `done` gets
// the last error with how many tries were made.
//
// Loop-thread only, as Connection::Connect; `done` runs on the loop thread.
#pragma once

#include <cstdint>
#include <string>

#include "comm/transport/connection.h"
#include "src/common/logging.h"

namespace pstrain {

void ConnectPatiently(EventLoop* loop, Logger log, const std::string& host, uint16_t port,
                      uint64_t patience_ms, Connection::ConnectCallback done);

// The patience a node gives a peer of its job: the loop's connect deadline
// (the smaller of PSTRAIN_CONNECT_TIMEOUT and the heartbeat timeout, after
// which the peer would count as lost anyway), or 30 s without one.
uint64_t PeerConnectPatienceMs(const EventLoop& loop);

}  // namespace pstrain
