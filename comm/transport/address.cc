#include "comm/transport/address.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "comm/transport/event_loop.h"

namespace pstrain {
namespace {

bool ParseLiteral(const std::string& host, uint16_t port, sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  if (uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(out)) == 0) return true;
  if (uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(out)) == 0) return true;
  return false;
}

StatusOr<sockaddr_storage> FirstAddress(int status, const addrinfo* res, const std::string& host,
                                        uint16_t port) {
  if (status != 0 || res == nullptr)
    return Unavailable(fmt::format("cannot resolve host '{}': {}", host,
                                   status != 0 ? uv_strerror(status) : "no address"));
  sockaddr_storage out{};
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  if (out.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&out)->sin_port = htons(port);
  if (out.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&out)->sin6_port = htons(port);
  return out;
}

addrinfo StreamHints() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  return hints;
}

}  // namespace

void ResolveAddress(EventLoop* loop, const std::string& host, uint16_t port,
                    std::function<void(StatusOr<sockaddr_storage>)> done) {
  sockaddr_storage literal;
  if (ParseLiteral(host, port, &literal)) return done(literal);
  struct Request {
    uv_getaddrinfo_t req;
    std::string host;
    uint16_t port;
    std::function<void(StatusOr<sockaddr_storage>)> done;
  };
  auto* r = new Request{{}, host, port, std::move(done)};
  r->req.data = r;
  addrinfo hints = StreamHints();
  int rc = uv_getaddrinfo(
      loop->uv(), &r->req,
      [](uv_getaddrinfo_t* req, int status, addrinfo* res) {
        std::unique_ptr<Request> r(static_cast<Request*>(req->data));
        auto addr = FirstAddress(status, res, r->host, r->port);
        uv_freeaddrinfo(res);
        r->done(addr);
      },
      host.c_str(), nullptr, &hints);
  if (rc != 0) {
    std::unique_ptr<Request> owned(r);
    owned->done(FirstAddress(rc, nullptr, host, port));
  }
}

StatusOr<sockaddr_storage> ResolveAddressNow(const std::string& host, uint16_t port) {
  sockaddr_storage literal;
  if (ParseLiteral(host, port, &literal)) return literal;
  addrinfo hints = StreamHints();
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  auto addr = FirstAddress(rc == 0 ? 0 : UV_EAI_NONAME, res, host, port);
  if (res != nullptr) freeaddrinfo(res);
  return addr;
}

StatusOr<std::string> LocalAddressToward(const std::string& host, uint16_t port) {
  auto peer = ResolveAddressNow(host, port);
  if (!peer.ok()) return peer.status();
  const auto* to = reinterpret_cast<const sockaddr*>(&*peer);
  int fd = ::socket(to->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(fmt::format("socket: {}", std::strerror(errno)));
  const socklen_t size = to->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  sockaddr_storage local{};
  socklen_t local_size = sizeof(local);
  Status st = Status::OK();
  if (::connect(fd, to, size) != 0) {
    st = Unavailable(fmt::format("no route to {}: {}", FormatAddress(to), std::strerror(errno)));
  } else if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0) {
    st = Unavailable(fmt::format("getsockname: {}", std::strerror(errno)));
  }
  ::close(fd);
  if (!st.ok()) return st;
  return FormatIp(reinterpret_cast<const sockaddr*>(&local));
}

bool CanListenOn(const std::string& host, uint16_t port) {
  auto addr = ResolveAddressNow(host, port);
  if (!addr.ok()) return false;
  const auto* at = reinterpret_cast<const sockaddr*>(&*addr);
  int fd = ::socket(at->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int on = 1;
  const socklen_t size = at->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  const bool free =
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0 && ::bind(fd, at, size) == 0;
  ::close(fd);
  return free;
}

std::string FormatIp(const sockaddr* addr) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (addr->sa_family == AF_INET)
    uv_ip4_name(reinterpret_cast<const sockaddr_in*>(addr), ip, sizeof(ip));
  else if (addr->sa_family == AF_INET6)
    uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(addr), ip, sizeof(ip));
  return ip;
}

uint16_t PortOf(const sockaddr* addr) {
  if (addr->sa_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port);
  if (addr->sa_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port);
  return 0;
}

std::string FormatAddress(const sockaddr* addr) {
  std::string ip = FormatIp(addr);
  if (addr->sa_family == AF_INET6) return fmt::format("[{}]:{}", ip, PortOf(addr));
  return fmt::format("{}:{}", ip, PortOf(addr));
}

}  // namespace pstrain
