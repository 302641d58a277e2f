#include "comm/transport/listener.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "comm/transport/address.h"
#include "src/common/open_files.h"

namespace pstrain {

namespace {

constexpr uint64_t kDescriptorCheckMs = 1000;
constexpr int kMinBacklog = 512;

// Whether this process has no file descriptor left (or the system none):
// a copy of `fd` fails with EMFILE or ENFILE. One system call.
int DescriptorShortage(int fd) {
  const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy >= 0) {
    close(copy);
    return 0;
  }
  return errno == EMFILE || errno == ENFILE ? errno : 0;
}

std::string DescriptorLimit() {
  const int64_t limit = OpenFileLimit();
  return limit < 0 ? "?" : std::to_string(limit);
}

}  // namespace

Listener::Listener(EventLoop* loop, Logger log)
    : loop_(loop), log_(std::move(log)), descriptor_check_(loop) {}

// The owner stops the loop (closing the handle) before destroying us.
Listener::~Listener() = default;

StatusOr<uint16_t> ListenTcp(EventLoop* loop, HandleOwner* owner, uv_tcp_t* tcp,
                             const std::string& host, uint16_t port, int backlog,
                             uv_connection_cb on_connection, const std::string& where) {
  auto addr = ResolveAddressNow(host, port);
  if (!addr.ok()) return addr.status().WithContext(where);
  uv_tcp_init(loop->uv(), tcp);
  tcp->data = owner;
  int rc = uv_tcp_bind(tcp, reinterpret_cast<const sockaddr*>(&*addr), 0);
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(tcp), backlog, on_connection);
  if (rc != 0) {
    CloseHandle(reinterpret_cast<uv_handle_t*>(tcp));
    return Unavailable(fmt::format("{}: {}", where, UvError(rc)));
  }
  sockaddr_storage bound{};
  int len = sizeof(bound);
  uv_tcp_getsockname(tcp, reinterpret_cast<sockaddr*>(&bound), &len);
  return PortOf(reinterpret_cast<const sockaddr*>(&bound));
}

StatusOr<uint16_t> Listener::Listen(const std::string& host, uint16_t port,
                                    AcceptHandler on_accept) {
  // Every node of the job may dial at once (a scheduler's N, a server's
  // workers): a queue shorter than that drops SYNs, and each dropped one
  // costs its node a second or more of retransmission. The kernel caps it
  // at net.core.somaxconn.
  const int backlog = std::max(kMinBacklog, loop_->security().max_handshaking);
  auto bound = ListenTcp(loop_, this, &tcp_, host, port, backlog, &Listener::OnConnection,
                         fmt::format("listen on {}:{}", host, port));
  if (!bound.ok()) return bound.status();
  open_ = true;
  on_accept_ = std::move(on_accept);
  descriptor_check_.RunEvery(kDescriptorCheckMs, [this] { WatchDescriptors(0); });
  return bound;
}

void Listener::Close() {
  descriptor_check_.Close();
  if (open_) CloseHandle(reinterpret_cast<uv_handle_t*>(&tcp_));
}

void Listener::WatchDescriptors(int accept_error) {
  if (!open_) return;
  uv_os_fd_t fd = -1;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&tcp_), &fd) != 0) return;
  const int shortage = accept_error != 0 ? accept_error : DescriptorShortage(fd);
  if ((shortage != 0) == out_of_descriptors_) return;
  out_of_descriptors_ = shortage != 0;
  if (shortage == ENFILE) {
    log_->error(
        "the system is out of file descriptors (ENFILE, {}): connections to this node are "
        "dropped and files cannot be opened until some are freed",
        std::strerror(ENFILE));
  } else if (shortage != 0) {
    log_->error(
        "this process is out of file descriptors (EMFILE, its limit is {}: ulimit -n): "
        "connections to this node are dropped and files cannot be opened; raise the limit",
        DescriptorLimit());
  } else {
    log_->warn("file descriptors are available again (limit {})", DescriptorLimit());
  }
}

void Listener::OnConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<Listener*>(static_cast<HandleOwner*>(server->data));
  if (status == UV_EMFILE || status == UV_ENFILE)
    return self->WatchDescriptors(status == UV_EMFILE ? EMFILE : ENFILE);
  if (status < 0) {
    self->log_->warn("accept failed: {}", UvError(status));
    return;
  }
  auto client = std::make_unique<uv_tcp_t>();
  uv_tcp_init(self->loop_->uv(), client.get());
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(client.get())) != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(client.release()),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_tcp_t*>(h); });
    return;
  }
  Connection::Ptr conn = Connection::Adopt(self->loop_, self->log_, std::move(client));
  if (self->loop_->handshaking() >= self->loop_->security().max_handshaking)
    return self->RefuseOverCap(conn);
  conn->Authenticate(self->on_accept_);
}

// A flood of connections costs a log line a second, not one each.
void Listener::RefuseOverCap(const Connection::Ptr& conn) {
  const int cap = loop_->security().max_handshaking;
  Status refused = Unavailable(
      fmt::format("{} connections are already in their handshake (PSTRAIN_MAX_HANDSHAKING)", cap));
  ++refused_;
  const uint64_t now = loop_->NowMs();
  if (last_refusal_log_ms_ == 0 || now >= last_refusal_log_ms_ + 1000) {
    log_->warn("closing connection from {}: {} ({} refused since the last such line)", conn->peer(),
               refused.message(), refused_);
    refused_ = 0;
    last_refusal_log_ms_ = std::max<uint64_t>(now, 1);
  }
  conn->Close(refused);
}

}  // namespace pstrain
