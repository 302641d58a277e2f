#include "comm/transport/patient_connect.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "comm/transport/timer.h"

namespace pstrain {
namespace {

constexpr uint64_t kFirstWaitMs = 20;
constexpr uint64_t kLongestWaitMs = 1000;

struct Attempt {
  EventLoop* loop;
  Logger log;
  std::string host;
  uint16_t port;
  uint64_t deadline_ms;  // no try begins after it
  uint64_t wait_ms = kFirstWaitMs;
  int tries = 0;
  Connection::ConnectCallback done;
};

void Try(std::shared_ptr<Attempt> a) {
  ++a->tries;
  Connection::Connect(a->loop, a->log, a->host, a->port, [a](StatusOr<Connection::Ptr> conn) {
    if (conn.ok() || conn.status().code() != StatusCode::kUnavailable)
      return a->done(std::move(conn));
    const uint64_t now = a->loop->NowMs();
    if (now + a->wait_ms > a->deadline_ms) {
      if (a->tries == 1) return a->done(std::move(conn));
      return a->done(
          Unavailable(fmt::format("{} (tried {} times)", conn.status().message(), a->tries)));
    }
    a->log->debug("{}; trying again in {} ms", conn.status().message(), a->wait_ms);
    RunAfter(a->loop, a->wait_ms, [a](bool fired) {
      if (!fired) return a->done(Aborted("event loop is stopping"));
      Try(a);
    });
    a->wait_ms = std::min(a->wait_ms * 2, kLongestWaitMs);
  });
}

}  // namespace

void ConnectPatiently(EventLoop* loop, Logger log, const std::string& host, uint16_t port,
                      uint64_t patience_ms, Connection::ConnectCallback done) {
  auto attempt = std::make_shared<Attempt>(Attempt{loop, std::move(log), host, port,
                                                   loop->NowMs() + patience_ms, kFirstWaitMs, 0,
                                                   std::move(done)});
  Try(std::move(attempt));
}

uint64_t PeerConnectPatienceMs(const EventLoop& loop) {
  const uint64_t deadline = loop.security().connect_timeout_ms;
  return deadline > 0 ? deadline : 30000;
}

}  // namespace pstrain
