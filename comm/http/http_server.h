// HttpServer: a small, strict HTTP/1.1 server on an EventLoop, for the
// scheduler's live view (roles/scheduler/view.h). It runs on the loop that
// already owns the scheduler's state, so the handler reads that state with
// no locks, and a request costs the loop one parse and one write.
//
// One request per connection: the response carries Connection: close, is
// written, then the write side is shut down and the connection closed once
// the client closes its side (or the deadline passes). What it refuses, and
// how: a malformed head gets 400, a head over kHttpMaxHead bytes 431, both
// followed by the close; a connection that has not finished within
// `deadline_ms` of its accept is closed (a slow or silent client); past
// `max_connections` open connections a new one is closed at once. Nothing a
// client sends can make it block, allocate more than its caps, or crash.
//
// Loop-thread only. The owner stops the loop (closing every handle) before
// destroying it, as for Listener.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "comm/http/http_request.h"
#include "comm/transport/event_loop.h"
#include "comm/transport/timer.h"
#include "src/common/logging.h"
#include "src/common/status.h"

namespace pstrain {

struct HttpLimits {
  int max_connections = 32;
  uint64_t deadline_ms = 5000;  // from accept to close, whatever the client does
  size_t max_head = kHttpMaxHead;
};

class HttpServer : public HandleOwner {
 public:
  // Gets every well-formed request (any method, any path); runs on the loop.
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  HttpServer(EventLoop* loop, Logger log, HttpLimits limits = {});
  ~HttpServer() override;

  // Binds `host:port` (0: any free port) and serves. Returns the bound port.
  StatusOr<uint16_t> Listen(const std::string& host, uint16_t port, Handler handler);
  // Stops accepting and closes every open connection. Idempotent.
  void Close();
  int open_connections() const { return static_cast<int>(connections_.size()); }

  void OnHandleClosed(uv_handle_t*) override { open_ = false; }

 private:
  class Conn;
  static void OnConnection(uv_stream_t* server, int status);
  void Sweep();
  void Forget(Conn* conn);

  EventLoop* loop_;
  Logger log_;
  HttpLimits limits_;
  Handler handler_;
  uv_tcp_t tcp_;
  bool open_ = false;
  Timer sweep_timer_;
  std::unordered_map<Conn*, std::unique_ptr<Conn>> connections_;
  uint64_t refused_ = 0;  // over the connection cap, since the last log line
  uint64_t last_refusal_log_ms_ = 0;
};

}  // namespace pstrain
