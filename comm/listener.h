// Listener: accepts TCP connections and hands each over as a Connection.
// Loop-thread only, except where noted.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <string>

#include "comm/connection.h"
#include "comm/event_loop.h"

namespace pstrain {

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

  EventLoop* loop_;
  Logger log_;
  uv_tcp_t tcp_;
  bool open_ = false;
  AcceptHandler on_accept_;
};

}  // namespace pstrain
