#include "comm/http/http_server.h"

#include <fmt/format.h>

#include <algorithm>

#include "comm/transport/address.h"
#include "comm/transport/connection.h"
#include "comm/transport/listener.h"

namespace pstrain {

// One client connection: read the head, answer once, close.
class HttpServer::Conn : public HandleOwner {
 public:
  Conn(HttpServer* server, uint64_t now_ms) : server_(server), accepted_ms_(now_ms) {
    tcp_.data = static_cast<HandleOwner*>(this);
  }
  uv_tcp_t* tcp() { return &tcp_; }
  uint64_t accepted_ms() const { return accepted_ms_; }

  void Start() {
    uv_read_start(reinterpret_cast<uv_stream_t*>(&tcp_), &Conn::OnAlloc, &Conn::OnRead);
  }
  void Close() {
    if (!closing_) {
      closing_ = true;
      CloseHandle(reinterpret_cast<uv_handle_t*>(&tcp_));
    }
  }
  // The server forgets (and frees) this connection once libuv is done with it.
  void OnHandleClosed(uv_handle_t*) override { server_->Forget(this); }

 private:
  static void OnAlloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
    auto* self = static_cast<Conn*>(static_cast<HandleOwner*>(h->data));
    *buf = uv_buf_init(self->read_buf_, sizeof(self->read_buf_));
  }
  static void OnRead(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
    auto* self = static_cast<Conn*>(static_cast<HandleOwner*>(s->data));
    if (nread < 0) return self->Close();  // EOF or error: nothing more to say
    if (self->answered_) {
      // After the answer only the client's close is awaited: what it still
      // sends is dropped, up to a cap.
      self->drained_ += static_cast<size_t>(nread);
      if (self->drained_ > 4 * self->server_->limits_.max_head) self->Close();
      return;
    }
    self->in_.append(buf->base, static_cast<size_t>(nread));
    self->OnBytes();
  }

  void OnBytes() {
    HttpParse parse = ParseHttpRequest(in_, server_->limits_.max_head);
    switch (parse.state) {
      case HttpParse::State::kIncomplete:
        return;
      case HttpParse::State::kBad:
        return Answer(HttpError(400, "bad request: " + parse.error), false);
      case HttpParse::State::kTooLarge:
        return Answer(HttpError(431, parse.error), false);
      case HttpParse::State::kComplete:
        break;
    }
    const bool head_only = parse.request.method == "HEAD";
    Answer(server_->handler_(parse.request), head_only);
  }

  void Answer(const HttpResponse& response, bool head_only) {
    answered_ = true;
    in_.clear();
    in_.shrink_to_fit();
    out_ = FormatHttpResponse(response, head_only);
    uv_buf_t b = uv_buf_init(out_.data(), static_cast<unsigned>(out_.size()));
    write_.data = this;
    const int rc =
        uv_write(&write_, reinterpret_cast<uv_stream_t*>(&tcp_), &b, 1, &Conn::OnWritten);
    if (rc != 0) Close();
  }
  static void OnWritten(uv_write_t* req, int status) {
    auto* self = static_cast<Conn*>(req->data);
    if (status != 0 || self->closing_) return self->Close();
    // Half-close: the client reads the whole answer before it sees the end,
    // instead of a reset for bytes it sent that were never read.
    self->shutdown_.data = self;
    if (uv_shutdown(&self->shutdown_, reinterpret_cast<uv_stream_t*>(&self->tcp_),
                    [](uv_shutdown_t*, int) {}) != 0)
      self->Close();
  }

  HttpServer* server_;  // outlives every connection: it frees them
  uint64_t accepted_ms_;
  uv_tcp_t tcp_;
  uv_write_t write_;
  uv_shutdown_t shutdown_;
  char read_buf_[4096];
  std::string in_;   // the head so far, at most max_head + one read
  std::string out_;  // the response, alive until written
  size_t drained_ = 0;
  bool answered_ = false;
  bool closing_ = false;
};

HttpServer::HttpServer(EventLoop* loop, Logger log, HttpLimits limits)
    : loop_(loop), log_(std::move(log)), limits_(limits), sweep_timer_(loop) {}

HttpServer::~HttpServer() = default;

StatusOr<uint16_t> HttpServer::Listen(const std::string& host, uint16_t port, Handler handler) {
  auto bound = ListenTcp(loop_, this, &tcp_, host, port, 128, &HttpServer::OnConnection,
                         fmt::format("HTTP listen on {}:{}", host, port));
  if (!bound.ok()) return bound.status();
  open_ = true;
  handler_ = std::move(handler);
  sweep_timer_.RunEvery(std::max<uint64_t>(limits_.deadline_ms / 10, 50), [this] { Sweep(); });
  return bound;
}

void HttpServer::Close() {
  if (open_) CloseHandle(reinterpret_cast<uv_handle_t*>(&tcp_));
  sweep_timer_.Close();
  for (auto& [raw, conn] : connections_) conn->Close();
}

void HttpServer::OnConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<HttpServer*>(static_cast<HandleOwner*>(server->data));
  if (status < 0) return;
  auto conn = std::make_unique<Conn>(self, self->loop_->NowMs());
  uv_tcp_init(self->loop_->uv(), conn->tcp());
  Conn* raw = conn.get();
  self->connections_.emplace(raw, std::move(conn));
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(raw->tcp())) != 0) return raw->Close();
  if (static_cast<int>(self->connections_.size()) > self->limits_.max_connections) {
    // A flood costs a log line a second, not one per connection.
    ++self->refused_;
    const uint64_t now = self->loop_->NowMs();
    if (self->last_refusal_log_ms_ == 0 || now >= self->last_refusal_log_ms_ + 1000) {
      self->log_->warn("HTTP: {} connections are open, closing new ones ({} since the last line)",
                       self->limits_.max_connections, self->refused_);
      self->refused_ = 0;
      self->last_refusal_log_ms_ = std::max<uint64_t>(now, 1);
    }
    return raw->Close();
  }
  raw->Start();
}

// Closes connections past their deadline: a client that sends nothing, or
// too slowly, or never closes its side.
void HttpServer::Sweep() {
  const uint64_t now = loop_->NowMs();
  for (auto& [raw, conn] : connections_)
    if (now - conn->accepted_ms() > limits_.deadline_ms) conn->Close();
}

void HttpServer::Forget(Conn* conn) { connections_.erase(conn); }

}  // namespace pstrain
