// ConnectPatiently (comm/transport/patient_connect.h): a peer of the job that
// is not answering yet is tried again until it does, within the patience
// given; one that never answers ends in an error naming the tries, not a
// wait without end. Real sockets on 127.0.0.1.
#include "comm/transport/patient_connect.h"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "comm/transport/completion.h"
#include "comm/transport/listener.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

// A port of 127.0.0.1 nobody listens on (bound, then closed).
uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  close(fd);
  return ntohs(addr.sin_port);
}

StatusOr<Connection::Ptr> ConnectFrom(EventLoop& loop, Logger log, uint16_t port,
                                      uint64_t patience_ms) {
  Completion<StatusOr<Connection::Ptr>> done;
  REQUIRE(loop.Post([&loop, log, port, patience_ms, done] {
    ConnectPatiently(&loop, log, "127.0.0.1", port, patience_ms,
                     [done](StatusOr<Connection::Ptr> conn) { done.Set(std::move(conn)); });
  }));
  return done.Wait();
}

// Connection::Connect alone fails here at once ("connection refused").
TEST_CASE("a peer that begins to listen late is reached") {
  auto sink = std::make_shared<testing::CaptureSink>();
  Logger log = testing::CaptureLogger("patient", sink);
  const uint16_t port = FreePort();
  EventLoop server_loop;
  Listener listener(&server_loop, log);
  REQUIRE(server_loop.Start().ok());
  // The listener opens 300 ms after the first try, refused until then.
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto listening = server_loop.Call<StatusOr<uint16_t>>(
        [&] {
          return listener.Listen("127.0.0.1", port,
                                 [](Connection::Ptr c) { c->Start(nullptr, nullptr); });
        },
        Aborted("stopped"));
    CHECK(listening.ok());
  });
  EventLoop loop;
  REQUIRE(loop.Start().ok());
  auto conn = ConnectFrom(loop, log, port, 20000);
  late.join();
  CHECK_MESSAGE(conn.ok(), conn.status().message());
  CHECK(loop.Stop().ok());
  CHECK(server_loop.Stop().ok());
}

TEST_CASE("a peer that never answers ends in an error naming the tries") {
  auto sink = std::make_shared<testing::CaptureSink>();
  Logger log = testing::CaptureLogger("patient", sink);
  EventLoop loop;
  REQUIRE(loop.Start().ok());
  const uint16_t port = FreePort();
  auto conn = ConnectFrom(loop, log, port, 300);
  REQUIRE_FALSE(conn.ok());
  CHECK(conn.status().code() == StatusCode::kUnavailable);
  const std::string message = conn.status().message();
  CHECK(message.find("connect to 127.0.0.1:" + std::to_string(port)) != std::string::npos);
  CHECK(message.find("times)") != std::string::npos);
  CHECK(loop.Stop().ok());
}

}  // namespace
}  // namespace pstrain
