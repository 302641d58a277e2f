// Listener: accepts TCP connections and hands each over as a Connection once
// its handshake succeeded (Connection::Authenticate). At most the loop's
// SecuritySettings::max_handshaking accepted connections are in their
// handshake at once; one more is closed on arrival.
//
// A process out of file descriptors cannot accept: libuv then drops the
// waiting connections without a word (its EMFILE trick), and the peers see
// only a reset. While it listens, a Listener checks every second whether a
// descriptor is left, and logs one line when the process runs out (and one
// when it has some again), naming the limit.
// Loop-thread only, except where noted.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <string>

#include "comm/transport/connection.h"
#include "comm/transport/event_loop.h"
#include "comm/transport/timer.h"

namespace pstrain {

// Initialises `tcp` as a handle of `owner`, binds it to `host:port` (port 0:
// any free port) and listens with `on_connection`. Returns the bound port,
// or an error starting with `where`, the handle then being closed. Shared by
// every listening socket (Listener, HttpServer).
StatusOr<uint16_t> ListenTcp(EventLoop* loop, HandleOwner* owner, uv_tcp_t* tcp,
                             const std::string& host, uint16_t port, int backlog,
                             uv_connection_cb on_connection, const std::string& where);

class Listener : public HandleOwner {
 public:
  using AcceptHandler = std::function<void(Connection::Ptr)>;

  Listener(EventLoop* loop, Logger log);
  ~Listener() override;

  // Binds `host:port` (port 0: any free port) and starts accepting. Returns
  // the bound port. The error names the address ("listen on 0.0.0.0:80: ...").
  StatusOr<uint16_t> Listen(const std::string& host, uint16_t port, AcceptHandler on_accept);
  void Close();

  void OnHandleClosed(uv_handle_t*) override { open_ = false; }

 private:
  static void OnConnection(uv_stream_t* server, int status);
  void RefuseOverCap(const Connection::Ptr& conn);
  // Logs when the process runs out of file descriptors, or has some again;
  // `accept_error` is an accept's EMFILE/ENFILE (0: a periodic check).
  void WatchDescriptors(int accept_error);

  EventLoop* loop_;
  Logger log_;
  uv_tcp_t tcp_;
  bool open_ = false;
  AcceptHandler on_accept_;
  uint64_t refused_ = 0;  // over the handshake cap, since the last log line
  uint64_t last_refusal_log_ms_ = 0;
  Timer descriptor_check_;
  bool out_of_descriptors_ = false;  // as last logged
};

}  // namespace pstrain
