// RequestFence: a server of a replicated job holds the workers' requests
// while it cannot tell whether the scheduler still counts it in.
//
// A server stopped (SIGSTOP) or cut off past the heartbeat timeout is
// counted lost, and its backup takes its rows over (roles/server/
// replication.h). When it wakes, what it holds is stale, yet a worker that
// has not heard of the new view yet may still ask it. So while its standing
// is in doubt (roles/node/cluster_client.h, CountedIn) a request waits
// here; it is served, in the order it came, once the scheduler vouches for
// this server, and is never served if the scheduler does not: its link is
// closed instead, and the worker sends it where the next view says.
//
// Thread-safety: the event loop's only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>

#include "comm/transport/connection.h"
#include "comm/transport/timer.h"

namespace pstrain {

class RequestFence {
 public:
  using Serve = std::function<void(const Connection::Ptr& conn, Incoming&& in)>;
  // `counted_in`: whether requests may be served now. `patience_ms`: how
  // long a request waits before its link is closed.
  RequestFence(EventLoop* loop, std::function<bool()> counted_in, Serve serve,
               uint64_t patience_ms);

  // Takes `in` and returns true when it must wait; false: serve it now.
  bool Hold(const Connection::Ptr& conn, Incoming& in);
  // Closes the links of what waits, for `why` (this server's part is over).
  void Drop(const Status& why);
  size_t waiting() const { return waiting_.size(); }
  // Requests never served: their links were closed.
  uint64_t dropped() const { return dropped_; }

 private:
  struct Waiting {
    Connection::Ptr conn;
    Incoming in;
    uint64_t since_ms;
  };
  void Check();

  EventLoop* loop_;
  std::function<bool()> counted_in_;
  Serve serve_;
  uint64_t patience_ms_;
  std::deque<Waiting> waiting_;
  Timer timer_;
  uint64_t dropped_ = 0;
};

}  // namespace pstrain
