// SecuritySettings: who may talk to a node, and what a peer may make it
// hold. Held by the EventLoop (set once by whoever builds the loop, before
// Start()), read by every Connection and Listener of that loop.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "src/common/config/options.h"

namespace pstrain {

// Defaults: those of ClusterOptions (src/common/config/options.h), where the
// variables are read.
struct SecuritySettings {
  // MS_CLUSTER_TOKEN; empty: connections exchange AuthHello only and anyone
  // who reaches a port can talk to it.
  std::string token;
  // A connection not authenticated within this long is closed.
  uint64_t handshake_timeout_ms = 0;
  // Accepted connections still in their handshake at once; one more is
  // closed on arrival. The job's own nodes are counted on top of the
  // configured cap (SecurityFrom), so that the cap bounds strangers only: a
  // server of W workers may see all W dial it at the same moment.
  int max_handshaking = 0;
  // A frame begun that receives no byte for this long is dropped with its
  // connection.
  uint64_t frame_stall_timeout_ms = 0;
  // Bytes queued to one peer and not yet taken by the kernel; past it the
  // connection is closed instead of growing.
  uint64_t max_queued_bytes = 0;
  // A TCP connect not established within this long fails, instead of
  // waiting out the kernel's SYN retries (about 2 min) when the peer's host
  // drops them (a firewall, a cut network). 0: no deadline of its own.
  uint64_t connect_timeout_ms = 0;
};

// Logged once per process started without a token (src/app/main.cc).
inline constexpr char kUnauthenticatedWarning[] =
    "MS_CLUSTER_TOKEN is not set: the cluster is unauthenticated; anyone who can reach its "
    "ports can join it, push gradients and pull weights";

// The settings a node's options ask for.
inline SecuritySettings SecurityFrom(const ClusterOptions& c) {
  SecuritySettings s;
  s.token = c.token;
  s.handshake_timeout_ms = static_cast<uint64_t>(c.handshake_timeout_s * 1000.0 + 0.5);
  // Every node of the job (servers, workers and the scheduler) may be in
  // its handshake with this one at once; the configured cap is what
  // strangers get beyond them.
  s.max_handshaking = c.max_handshaking + std::max(0, c.server_num) + std::max(0, c.worker_num) + 1;
  s.frame_stall_timeout_ms = static_cast<uint64_t>(c.frame_stall_timeout_s * 1000.0 + 0.5);
  s.max_queued_bytes = c.max_queued_bytes;
  // A peer that cannot be reached within the heartbeat timeout would count
  // as lost anyway; the scheduler is retried until the connect timeout.
  s.connect_timeout_ms =
      static_cast<uint64_t>(std::min(c.heartbeat_timeout_s, c.connect_timeout_s) * 1000.0 + 0.5);
  return s;
}

}  // namespace pstrain
