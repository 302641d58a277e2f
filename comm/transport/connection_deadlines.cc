// A connection's deadlines (connect, handshake, a stalled frame, an
// unanswered call) and the loop-wide sweeps over every connection that
// enforce them (CheckConnectionDeadlines, ExpireOverdueCalls), with
// CloseAllConnections: the clock's side of comm/transport/connection.h.
#include <fmt/format.h>

#include <vector>

#include "comm/transport/connection.h"

namespace pstrain {

void Connection::CheckDeadlines(uint64_t now_ms) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  if (closing_) return;
  const SecuritySettings& s = loop_->security();
  if (connect_began_ms_ > 0 && s.connect_timeout_ms > 0 &&
      now_ms >= connect_began_ms_ + s.connect_timeout_ms)
    return Close(DeadlineExceeded(fmt::format(
        "connect to {}: no answer within {:.1f} s (the peer's host or the network drops the "
        "connection attempt; the deadline is the shorter of PSTRAIN_HEARTBEAT_TIMEOUT and "
        "PSTRAIN_CONNECT_TIMEOUT)",
        peer_, s.connect_timeout_ms / 1e3)));
  if (handshake_ && now_ms >= handshake_began_ms_ + s.handshake_timeout_ms)
    return FailHandshake(DeadlineExceeded(fmt::format(
        "no handshake within {:.1f} s (PSTRAIN_HANDSHAKE_TIMEOUT)", s.handshake_timeout_ms / 1e3)));
  // A frame begun (bytes in, not all of them framed) must keep arriving:
  // a truncated frame held open is dropped.
  if (frame_bytes_in_ > frame_bytes_out_ && now_ms >= last_byte_ms_ + s.frame_stall_timeout_ms) {
    Status stalled = DeadlineExceeded(
        fmt::format("a frame begun received no byte for {:.1f} s (PSTRAIN_FRAME_STALL_TIMEOUT)",
                    s.frame_stall_timeout_ms / 1e3));
    WarnClosing(fmt::format("closing connection from {}: {}", peer_, stalled.message()));
    Close(stalled);
  }
}

void Connection::ExpireOverdueCalls(uint64_t now_ms, uint64_t timeout_ms) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  if (closing_) return;
  for (const auto& [id, p] : pending_) {
    if (p.sent_ms == 0 || now_ms < p.sent_ms + timeout_ms) continue;
    Status overdue = DeadlineExceeded(
        fmt::format("{} has not answered {} within {:.1f} s", peer_, p.what, timeout_ms / 1000.0));
    log_->warn("closing the connection to {}: {}", peer_, overdue.message());
    return Close(overdue);
  }
}

namespace {

// The Connection owning `handle`, or null for any other kind of handle.
Connection* ConnectionOf(uv_handle_t* handle) {
  if (handle->type != UV_TCP || handle->data == nullptr || uv_is_closing(handle)) return nullptr;
  return dynamic_cast<Connection*>(static_cast<HandleOwner*>(handle->data));
}

// Collected first: closing may run callbacks that open or close others.
std::vector<Connection::Ptr> AllConnections(EventLoop* loop) {
  std::vector<Connection::Ptr> all;
  uv_walk(
      loop->uv(),
      [](uv_handle_t* h, void* arg) {
        if (Connection* c = ConnectionOf(h))
          static_cast<std::vector<Connection::Ptr>*>(arg)->push_back(c->shared_from_this());
      },
      &all);
  return all;
}

}  // namespace

void CheckConnectionDeadlines(EventLoop* loop) {
  PSTRAIN_DCHECK_ON_LOOP(loop);
  const uint64_t now = loop->NowMs();
  for (const Connection::Ptr& c : AllConnections(loop)) c->CheckDeadlines(now);
}

void ExpireOverdueCalls(EventLoop* loop, uint64_t timeout_ms) {
  PSTRAIN_DCHECK_ON_LOOP(loop);
  struct Args {
    uint64_t now, timeout;
  } args{loop->NowMs(), timeout_ms};
  uv_walk(
      loop->uv(),
      [](uv_handle_t* h, void* arg) {
        auto* a = static_cast<Args*>(arg);
        if (Connection* c = ConnectionOf(h)) c->ExpireOverdueCalls(a->now, a->timeout);
      },
      &args);
}

void CloseAllConnections(EventLoop* loop, const Status& why) {
  PSTRAIN_DCHECK_ON_LOOP(loop);
  for (const Connection::Ptr& c : AllConnections(loop)) c->Close(why);
}

}  // namespace pstrain
