// Connections to servers: a worker's, made at the start, when servers join
// a running job (roles/worker/worker.cc), and for a copy of table rows
// ahead of such a change (roles/worker/rows_ahead.h); a server's to the
// servers that back its partitions up (roles/server/replication.h).
#pragma once

#include <chrono>
#include <vector>

#include "comm/transport/connection.h"
#include "comm/transport/event_loop.h"
#include "comm/transport/messages.h"
#include "roles/node/cluster_client.h"
#include "src/common/logging.h"
#include "src/common/status.h"

namespace pstrain {

// Connects to each of `servers` and introduces itself with `hello`; the
// result holds each connection at its server's rank (`size` in all; the
// other places null). Any failure, named by its server, fails the call.
StatusOr<std::vector<Connection::Ptr>> ConnectToServers(EventLoop* loop, Logger log,
                                                        const Hello& hello,
                                                        const std::vector<NodeInfo>& servers,
                                                        size_t size);

// The servers of ranks `from` to `to` - 1 in the topology `cluster` holds,
// once it lists them all: a server that joined a running job may be in a
// topology still on its way (a delta refused is followed by the whole
// list). DeadlineExceeded after `limit`.
StatusOr<std::vector<NodeInfo>> AwaitServers(ClusterClient* cluster, int from, int to,
                                             std::chrono::milliseconds limit);

}  // namespace pstrain
