// Connections under attack, with real sockets on 127.0.0.1: the handshake
// refuses another token and names the source and the check; the limits of
// SecuritySettings drop a slowloris, a flood of half-open handshakes, a
// frame left unfinished and a peer that does not read; a connect nobody
// answers ends at its deadline. Each test fails without the limit it is
// about (the peer would be held for ever).
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "comm/transport/completion.h"
#include "comm/transport/connection.h"
#include "comm/transport/frame.h"
#include "comm/transport/listener.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

using testing::CaptureLogger;
using testing::CaptureSink;
using Clock = std::chrono::steady_clock;

SecuritySettings Settings(const std::string& token) {
  SecuritySettings s = SecurityFrom(ClusterOptions{});
  s.token = token;
  return s;
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A node's port: a listener that answers every request with Ack.
struct Acceptor {
  Acceptor(const SecuritySettings& s, Logger log) : listener(&loop, std::move(log)) {
    loop.SetSecurity(s);
    REQUIRE(loop.Start().ok());
    auto p = loop.Call<StatusOr<uint16_t>>(
        [this] {
          return listener.Listen("127.0.0.1", 0, [this](Connection::Ptr c) {
            ++accepted;
            c->Start([](const Connection::Ptr& conn,
                        Incoming&& in) { conn->Reply(in.message.request_id, Ack{}); },
                     nullptr);
          });
        },
        Aborted("stopped"));
    REQUIRE(p.ok());
    port = *p;
  }
  ~Acceptor() { CHECK(loop.Stop().ok()); }
  EventLoop loop;
  Listener listener;
  std::atomic<int> accepted{0};
  uint16_t port = 0;
};

// A client loop with `s`; Dial connects and, if that works, calls once.
struct Client {
  explicit Client(const SecuritySettings& s) {
    loop.SetSecurity(s);
    REQUIRE(loop.Start().ok());
  }
  ~Client() { CHECK(loop.Stop().ok()); }
  Status Dial(uint16_t port) {
    Completion<Status> done;
    loop.Post([this, port, done] {
      Connection::Connect(&loop, MakeLogger("client"), "127.0.0.1", port,
                          [done](StatusOr<Connection::Ptr> c) {
                            if (!c.ok()) return done.Set(c.status());
                            (*c)->Start(nullptr, nullptr);
                            (*c)->Call(Heartbeat{}, [done, c = *c](StatusOr<Incoming> reply) {
                              done.Set(reply.status());
                              c->Close(Aborted("done"));
                            });
                          });
    });
    return done.WaitFor(std::chrono::seconds(20)).value_or(DeadlineExceeded("dial: no answer"));
  }
  EventLoop loop;
};

// A plain socket to 127.0.0.1:port: what an attacker holds.
struct RawSocket {
  explicit RawSocket(uint16_t port) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~RawSocket() { close(fd); }
  bool Send(const std::vector<uint8_t>& bytes) {
    return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // Reads what comes within `ms`; false once the peer closed (EOF or reset).
  bool OpenAfter(int ms) {
    const auto end = Clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      const int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
      if (left <= 0) return true;
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, left) <= 0) continue;
      char buf[4096];
      if (recv(fd, buf, sizeof(buf), 0) <= 0) return false;
    }
  }
  int fd = -1;
};

// A whole frame for `body`, as a peer would send it.
std::vector<uint8_t> FrameOf(const MessageBody& body) {
  std::vector<uint8_t> header = EncodeHeader(Message{0, false, body});
  std::vector<uint8_t> frame(kFixedHeaderBytes);
  EncodeFixedHeader(static_cast<uint32_t>(header.size()), 0, frame.data());
  frame.insert(frame.end(), header.begin(), header.end());
  return frame;
}

TEST_CASE("another token, or none, is refused at a node's port, naming the source and the check") {
  auto sink = std::make_shared<CaptureSink>();
  Acceptor node(Settings("s3cret"), CaptureLogger("node", sink));

  Status wrong = Client(Settings("guess")).Dial(node.port);
  CHECK(wrong.code() == StatusCode::kPermissionDenied);
  CHECK(wrong.message().find("authentication failed with 127.0.0.1:") != std::string::npos);
  CHECK(wrong.message().find("proof does not match MS_CLUSTER_TOKEN") != std::string::npos);
  REQUIRE(sink->WaitFor("proof does not match MS_CLUSTER_TOKEN"));
  CHECK(sink->Matching("authentication failed from 127.0.0.1:").size() == 1);

  Status none = Client(Settings("")).Dial(node.port);
  CHECK(none.code() == StatusCode::kPermissionDenied);
  CHECK(none.message().find("MS_CLUSTER_TOKEN is not set on this side") != std::string::npos);
  CHECK(sink->WaitFor("peer sent no proof but MS_CLUSTER_TOKEN is set"));
  CHECK(node.accepted == 0);  // the node's handler never saw either

  CHECK(Client(Settings("s3cret")).Dial(node.port).ok());
  CHECK(node.accepted == 1);
}

TEST_CASE("a frame other than the handshake's is refused before the handshake") {
  auto sink = std::make_shared<CaptureSink>();
  Acceptor node(Settings("s3cret"), CaptureLogger("node", sink));
  RawSocket raw(node.port);
  // A push announcing a payload, as a stranger who skips the handshake
  // would send it: the tiny pre-handshake limits refuse it at its header.
  std::vector<uint8_t> frame = FrameOf(PushRequest{"fc3.bias", 0, 0, 0, PushKind::kGradient});
  EncodeFixedHeader(static_cast<uint32_t>(frame.size() - kFixedHeaderBytes), 40, frame.data());
  REQUIRE(raw.Send(frame));
  CHECK_FALSE(raw.OpenAfter(5000));
  CHECK(sink->WaitFor("before the handshake"));
  CHECK(node.accepted == 0);
}

TEST_CASE("strangers refused in a flood cost a few log lines a second, not one each") {
  auto sink = std::make_shared<CaptureSink>();
  Acceptor node(Settings("s3cret"), CaptureLogger("node", sink));
  const std::vector<uint8_t> junk(64, 0xab);  // no frame magic
  const auto began = Clock::now();
  for (int i = 0; i < 60; ++i) {
    RawSocket raw(node.port);
    REQUIRE(raw.Send(junk));
    CHECK_FALSE(raw.OpenAfter(5000));  // refused
  }
  const double seconds = SecondsSince(began);
  const size_t lines = sink->Matching("bad frame").size();
  MESSAGE(lines << " lines for 60 refusals in " << seconds << " s");
  // At most kRefusalLinesPerSecond in each second begun.
  CHECK(lines <= static_cast<size_t>(EventLoop::kRefusalLinesPerSecond) *
                     (static_cast<size_t>(seconds) + 2));
  CHECK(lines >= 1);
  if (seconds < 1) CHECK(lines <= static_cast<size_t>(EventLoop::kRefusalLinesPerSecond));
  // The node still serves a member.
  CHECK(Client(Settings("s3cret")).Dial(node.port).ok());
}

TEST_CASE("a peer that sends one byte at a time is dropped at the handshake deadline") {
  auto sink = std::make_shared<CaptureSink>();
  SecuritySettings s = Settings("s3cret");
  s.handshake_timeout_ms = 1000;
  Acceptor node(s, CaptureLogger("node", sink));
  RawSocket raw(node.port);
  const std::vector<uint8_t> hello = FrameOf(AuthHello{kHandshakeVersion, {}, true});
  const auto start = Clock::now();
  bool open = true;
  for (size_t i = 0; open && SecondsSince(start) < 8; ++i)
    open = raw.Send({hello[i % hello.size()]}) && raw.OpenAfter(100);
  const double held = SecondsSince(start);
  CHECK_FALSE(open);
  CHECK(held >= 0.9);
  CHECK(held < 3.0);
  MESSAGE("a one-byte-per-100-ms peer was dropped after " << held << " s (deadline 1 s)");
  CHECK(sink->WaitFor("no handshake within 1.0 s (PSTRAIN_HANDSHAKE_TIMEOUT)"));
}

TEST_CASE("connections beyond the cap of handshakes in progress are closed at once") {
  auto sink = std::make_shared<CaptureSink>();
  SecuritySettings s = Settings("s3cret");
  s.max_handshaking = 4;
  Acceptor node(s, CaptureLogger("node", sink));
  std::vector<std::unique_ptr<RawSocket>> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(std::make_unique<RawSocket>(node.port));
  // Each of the four gets the node's AuthHello: all are in their handshake.
  for (auto& r : idle) {
    pollfd p{r->fd, POLLIN, 0};
    REQUIRE(poll(&p, 1, 5000) == 1);
  }
  for (int i = 0; i < 20; ++i) {
    RawSocket extra(node.port);
    CHECK_FALSE(extra.OpenAfter(5000));
  }
  CHECK(sink->WaitFor("4 connections are already in their handshake (PSTRAIN_MAX_HANDSHAKING)"));
  // Rate-limited: a line a second, not one per refusal.
  CHECK(sink->Matching("PSTRAIN_MAX_HANDSHAKING").size() < 5);
  // Once they are gone, a real peer gets in.
  idle.clear();
  Status dialed = Unavailable("not tried");
  for (int attempt = 0; attempt < 50 && !dialed.ok(); ++attempt) {
    dialed = Client(Settings("s3cret")).Dial(node.port);
  }
  CHECK(dialed.ok());
}

TEST_CASE("a frame begun and never finished is dropped at the stall deadline") {
  auto sink = std::make_shared<CaptureSink>();
  SecuritySettings s = Settings("");
  s.frame_stall_timeout_ms = 500;
  Acceptor node(s, CaptureLogger("node", sink));
  RawSocket raw(node.port);
  Handshake::Nonce nonce{};
  nonce[0] = 7;
  REQUIRE(raw.Send(FrameOf(AuthHello{kHandshakeVersion, nonce, false})));
  // Authenticated (no token): now 10 bytes of a frame's fixed header, and
  // nothing more.
  std::vector<uint8_t> frame = FrameOf(Heartbeat{});
  REQUIRE(raw.Send(std::vector<uint8_t>(frame.begin(), frame.begin() + 10)));
  const auto start = Clock::now();
  CHECK_FALSE(raw.OpenAfter(5000));
  const double held = SecondsSince(start);
  CHECK(held >= 0.4);
  CHECK(held < 3.0);
  CHECK(sink->WaitFor("received no byte for 0.5 s (PSTRAIN_FRAME_STALL_TIMEOUT)"));
  CHECK(node.accepted == 1);
}

TEST_CASE("a peer that does not read is cut off at the queued-bytes cap") {
  // The peer: a plain socket that answers the handshake (no token) and then
  // reads nothing.
  int server = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(server >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(listen(server, 1) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  std::thread peer([server] {
    int fd = accept(server, nullptr, nullptr);
    if (fd < 0) return;
    Handshake::Nonce nonce{};
    nonce[0] = 9;
    std::vector<uint8_t> hello = FrameOf(AuthHello{kHandshakeVersion, nonce, false});
    (void)!send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
    pollfd p{fd, POLLRDHUP, 0};
    poll(&p, 1, 20000);  // until the other end closes
    close(fd);
  });

  SecuritySettings s = Settings("");
  s.max_queued_bytes = 8 << 20;
  Client client(s);
  Completion<Status> closed;
  auto chunk = std::make_shared<std::vector<uint8_t>>(1 << 20);
  client.loop.Post([&client, &closed, chunk, port = ntohs(addr.sin_port)] {
    Connection::Connect(
        &client.loop, MakeLogger("client"), "127.0.0.1", port,
        [&client, closed, chunk](StatusOr<Connection::Ptr> c) {
          if (!c.ok()) return closed.Set(c.status());
          (*c)->Start(nullptr,
                      [closed](const Connection::Ptr&, const Status& why) { closed.Set(why); });
          // 64 MiB, 1 MiB a loop turn, to a peer that takes none of it.
          for (int i = 0; i < 64; ++i)
            client.loop.Post([c = *c, chunk] {
              c->Notify(RingChunk{1, 0, 0}, Payload{chunk->data(), chunk->size(), chunk});
            });
        });
  });
  auto why = closed.WaitFor(std::chrono::seconds(20));
  REQUIRE(why.has_value());
  CHECK(why->message().find("PSTRAIN_MAX_QUEUED_BYTES") != std::string::npos);
  MESSAGE(why->message());
  peer.join();
  close(server);
}

// A measurement, not an assertion: what the token costs. Connection set-up
// (TCP connect + handshake) and small round trips on the open connection,
// without and with a token, alternating, medians.
TEST_CASE("what a token costs: connection set-up and round trips, with and without") {
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  for (int round = 0; round < 2; ++round) {
    for (const std::string token : {"", "s3cret"}) {
      Acceptor node(Settings(token), MakeLogger("node"));
      Client client(Settings(token));
      std::vector<double> setup_ms, call_us;
      for (int i = 0; i < 200; ++i) {
        Completion<StatusOr<Connection::Ptr>> opened;
        const auto start = Clock::now();
        client.loop.Post([&client, &node, opened] {
          Connection::Connect(&client.loop, MakeLogger("client"), "127.0.0.1", node.port,
                              [opened](StatusOr<Connection::Ptr> c) { opened.Set(c); });
        });
        auto conn = opened.Wait();
        REQUIRE(conn.ok());
        setup_ms.push_back(SecondsSince(start) * 1e3);
        if (i == 0) {
          client.loop.Post([c = *conn] { c->Start(nullptr, nullptr); });
          for (int k = 0; k < 2000; ++k) {
            Completion<Status> answered;
            const auto t0 = Clock::now();
            client.loop.Post([c = *conn, answered] {
              c->Call(Heartbeat{}, [answered](StatusOr<Incoming> r) { answered.Set(r.status()); });
            });
            REQUIRE(answered.Wait().ok());
            call_us.push_back(SecondsSince(t0) * 1e6);
          }
        }
        client.loop.Post([c = *conn] { c->Close(Aborted("measured")); });
      }
      MESSAGE("round " << round << (token.empty() ? " without" : " with   ")
                       << " a token: connection set-up median " << median(setup_ms)
                       << " ms (200), round trip median " << median(call_us) << " us (2000)");
    }
  }
}

// A peer whose host drops the SYN (a firewall, a cut link) would hold a
// connect in the kernel's SYN retries for about 2 minutes; the connect
// deadline ends it with a reason instead. A listening socket whose accept
// queue is full drops SYNs the same way, on 127.0.0.1.
TEST_CASE("a connect that gets no answer fails at the connect deadline, naming the peer") {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listener >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(listen(listener, 0) == 0);  // the queue holds one, never accepted
  socklen_t len = sizeof(addr);
  REQUIRE(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const uint16_t port = ntohs(addr.sin_port);
  RawSocket fills_the_queue(port);

  SecuritySettings s = Settings("");
  s.connect_timeout_ms = 700;
  Client client(s);
  Completion<Status> failed;
  const auto start = Clock::now();
  client.loop.Post([&client, port, failed] {
    Connection::Connect(&client.loop, MakeLogger("client"), "127.0.0.1", port,
                        [failed](StatusOr<Connection::Ptr> c) { failed.Set(c.status()); });
  });
  auto result = failed.WaitFor(std::chrono::seconds(20));
  const double waited = SecondsSince(start);
  close(listener);
  REQUIRE_MESSAGE(result.has_value(), "the connect was still waiting after 20 s");
  CHECK(result->code() == StatusCode::kDeadlineExceeded);
  CHECK(result->message().find("connect to 127.0.0.1:" + std::to_string(port)) !=
        std::string::npos);
  CHECK(result->message().find("no answer within 0.7 s") != std::string::npos);
  CHECK(waited >= 0.6);
  MESSAGE("the connect failed after " << waited << " s: " << result->message());
}

}  // namespace
}  // namespace pstrain
