// comm/transport/tls.h: two sessions talking over memory, certificates made by the
// openssl command line (tests/tools/make_test_certs.sh) in a temp dir.
#include "comm/transport/tls.h"

#include <doctest/doctest.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "comm/transport/connection.h"
#include "comm/transport/listener.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

constexpr char kSuite[] = "tls";

Status OpensslCliPresent() {
  if (std::system("openssl version >/dev/null 2>&1") == 0) return Status::OK();
  return Unavailable("the openssl command line is not installed");
}
const bool kSuiteRegistered = testing::SuiteNeeds(kSuite, OpensslCliPresent);

// Two CAs: "cluster" signs a and b, "other" signs stranger. Made once.
struct Certs {
  fs::path dir;
  Certs() {
    dir = fs::temp_directory_path() / fs::path("pstrain_tls_test_" + std::to_string(getpid()));
    fs::create_directories(dir);
    const std::string script = PSTRAIN_CERT_SCRIPT;
    const std::string cluster = (dir / "cluster").string(), other = (dir / "other").string();
    REQUIRE(std::system(("sh " + script + " " + cluster + " a b").c_str()) == 0);
    REQUIRE(std::system(("sh " + script + " " + other + " stranger").c_str()) == 0);
  }
  ~Certs() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  TlsFiles Files(const std::string& ca_dir, const std::string& name) const {
    const fs::path d = dir / ca_dir;
    return {(d / (name + ".pem")).string(), (d / (name + ".key")).string(),
            (d / "ca.pem").string()};
  }
};

const Certs& TestCerts() {
  static Certs certs;
  return certs;
}

std::shared_ptr<TlsContext> Context(const TlsFiles& files) {
  auto context = TlsContext::Load(files);
  REQUIRE_MESSAGE(context.ok(), context.status().message());
  return *context;
}

std::unique_ptr<TlsSession> Session(const TlsFiles& files, TlsSession::Side side,
                                    const std::string& peer) {
  auto session = TlsSession::Create(Context(files), side, peer);
  REQUIRE(session.ok());
  return std::move(*session);
}

void Move(TlsSession& from, TlsSession& to) {
  std::vector<uint8_t> bytes = from.TakeOutput();
  to.Feed(bytes.data(), bytes.size());
}

// Runs the handshake to its end: OK when both ends are established, else the
// first error (server's side first, as a node would log it).
Status Handshake(TlsSession& client, TlsSession& server) {
  PSTRAIN_RETURN_IF_ERROR(client.Handshake());
  for (int round = 0; round < 10; ++round) {
    Move(client, server);
    Status s = server.Handshake();
    Move(server, client);
    if (!s.ok()) return s.WithContext("server");
    Status c = client.Handshake();
    if (!c.ok()) return c.WithContext("client");
    // TLS 1.3: the client is done first; its last flight ends the server's.
    if (client.established() && server.established() && client.output_size() == 0) break;
  }
  // A refusal after the client's last flight reaches it on its next read.
  Move(server, client);
  uint8_t byte;
  auto read = client.Read(&byte, 1);
  if (!read.ok()) return read.status().WithContext("client");
  if (!client.established() || !server.established()) return Internal("handshake did not end");
  return Status::OK();
}

// Sends `n` patterned bytes from `from` to `to`, read in 1 MiB spans, and
// checks each byte.
void Transfer(TlsSession& from, TlsSession& to, size_t n) {
  std::vector<uint8_t> data(n), got(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(i * 7 + (i >> 16));
  size_t have = 0;
  for (size_t sent = 0; sent < n;) {
    const size_t chunk = std::min<size_t>(n - sent, 4 << 20);
    REQUIRE(from.Write(data.data() + sent, chunk).ok());
    sent += chunk;
    Move(from, to);
    for (;;) {
      auto r = to.Read(got.data() + have, std::min<size_t>(n - have, 1 << 20));
      REQUIRE_MESSAGE(r.ok(), r.status().message());
      if (*r == 0) break;
      have += *r;
    }
  }
  REQUIRE(have == n);
  CHECK(got == data);
}

TEST_SUITE("tls") {
  TEST_CASE("tls: the handshake completes and data of any size goes both ways") {
    const Certs& certs = TestCerts();
    auto client = Session(certs.Files("cluster", "a"), TlsSession::Side::kClient, "server:1");
    auto server = Session(certs.Files("cluster", "b"), TlsSession::Side::kServer, "client:2");
    Status hs = Handshake(*client, *server);
    REQUIRE_MESSAGE(hs.ok(), hs.message());
    SUBCASE("small") {
      Transfer(*client, *server, 100);
      Transfer(*server, *client, 1);
    }
    SUBCASE("64 MiB each way") {
      Transfer(*client, *server, size_t{64} << 20);
      Transfer(*server, *client, size_t{64} << 20);
    }
  }

  TEST_CASE("tls: a certificate from another CA is refused, naming the peer and the reason") {
    const Certs& certs = TestCerts();
    auto client = Session(certs.Files("other", "stranger"), TlsSession::Side::kClient, "s:1");
    // The stranger trusts the cluster CA, so only the server's check can fail.
    client = Session({certs.Files("other", "stranger").cert, certs.Files("other", "stranger").key,
                      certs.Files("cluster", "a").ca},
                     TlsSession::Side::kClient, "s:1");
    auto server = Session(certs.Files("cluster", "b"), TlsSession::Side::kServer, "10.1.2.3:4444");
    Status hs = Handshake(*client, *server);
    REQUIRE_FALSE(hs.ok());
    CHECK(hs.message().find("server") == 0);
    CHECK(hs.message().find("10.1.2.3:4444") != std::string::npos);
    CHECK(hs.message().find("certificate verify failed") != std::string::npos);
    // Final, like a wrong token: the node that sees it does not retry.
    CHECK(hs.code() == StatusCode::kPermissionDenied);
    CHECK_FALSE(server->established());
  }

  TEST_CASE("tls: a server from another CA is refused by the client") {
    const Certs& certs = TestCerts();
    auto client = Session(certs.Files("cluster", "a"), TlsSession::Side::kClient, "s:1");
    auto server = Session({certs.Files("other", "stranger").cert,
                           certs.Files("other", "stranger").key, certs.Files("cluster", "a").ca},
                          TlsSession::Side::kServer, "c:2");
    Status hs = Handshake(*client, *server);
    REQUIRE_FALSE(hs.ok());
    CHECK(hs.message().find("client") == 0);
    CHECK(hs.message().find("certificate verify failed") != std::string::npos);
    CHECK(hs.code() == StatusCode::kPermissionDenied);
  }

  TEST_CASE("tls: a client without a certificate is refused") {
    const Certs& certs = TestCerts();
    TlsFiles files = certs.Files("cluster", "a");
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_load_verify_locations(ctx, files.ca.c_str(), nullptr);
    SSL* ssl = SSL_new(ctx);
    BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(in, -1);
    SSL_set_bio(ssl, in, out);
    SSL_set_connect_state(ssl);
    auto server = Session(certs.Files("cluster", "b"), TlsSession::Side::kServer, "c:9");
    Status refused;
    for (int round = 0; round < 10 && refused.ok(); ++round) {
      SSL_do_handshake(ssl);
      char buf[16384];
      for (int n; (n = BIO_read(out, buf, sizeof(buf))) > 0;)
        server->Feed(reinterpret_cast<uint8_t*>(buf), static_cast<size_t>(n));
      refused = server->Handshake();
      std::vector<uint8_t> back = server->TakeOutput();
      BIO_write(in, back.data(), static_cast<int>(back.size()));
    }
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.message().find("peer did not return a certificate") != std::string::npos);
  }

  // A client whose OpenSSL offers at most TLS 1.2, driven by hand over memory.
  TEST_CASE("tls: a client offering only TLS 1.2 is refused") {
    const Certs& certs = TestCerts();
    TlsFiles files = certs.Files("cluster", "a");
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    REQUIRE(SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) == 1);
    REQUIRE(SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) == 1);
    SSL* ssl = SSL_new(ctx);
    BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(in, -1);
    SSL_set_bio(ssl, in, out);
    SSL_set_connect_state(ssl);
    SSL_do_handshake(ssl);
    std::vector<uint8_t> hello(static_cast<size_t>(BIO_pending(out)));
    BIO_read(out, hello.data(), static_cast<int>(hello.size()));
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    auto server = Session(certs.Files("cluster", "b"), TlsSession::Side::kServer, "old:1");
    server->Feed(hello.data(), hello.size());
    Status hs = server->Handshake();
    REQUIRE_FALSE(hs.ok());
    CHECK(hs.message().find("unsupported protocol") != std::string::npos);
    CHECK(server->output_size() > 0);  // the alert that tells the client why
  }

  TEST_CASE("tls: plaintext bytes where a handshake belongs are refused") {
    const Certs& certs = TestCerts();
    auto server = Session(certs.Files("cluster", "b"), TlsSession::Side::kServer, "plain:1");
    // A pstrain frame's fixed header: "PSTR", version 1, ...
    const uint8_t frame[20] = {'P', 'S', 'T', 'R', 1, 0, 0, 0, 16, 0, 0, 0};
    server->Feed(frame, sizeof(frame));
    Status hs = server->Handshake();
    REQUIRE_FALSE(hs.ok());
    CHECK(hs.message().find("plain:1") != std::string::npos);
    CHECK_FALSE(server->established());
  }

  TEST_CASE("tls: bad files are refused, naming the file and its variable") {
    const Certs& certs = TestCerts();
    const TlsFiles good = certs.Files("cluster", "a");
    auto error = [](const TlsFiles& files) {
      auto context = TlsContext::Load(files);
      REQUIRE_FALSE(context.ok());
      return context.status().message();
    };
    SUBCASE("missing") {
      TlsFiles f = good;
      f.key = (certs.dir / "nope.key").string();
      std::string e = error(f);
      CHECK(e.find("PSTRAIN_TLS_KEY") != std::string::npos);
      CHECK(e.find(f.key) != std::string::npos);
      CHECK(e.find("No such file") != std::string::npos);
    }
    SUBCASE("a certificate where the key belongs") {
      TlsFiles f = good;
      f.key = good.cert;
      std::string e = error(f);
      CHECK(e.find("PSTRAIN_TLS_KEY") != std::string::npos);
      CHECK(e.find("not an unencrypted PEM private key") != std::string::npos);
    }
    SUBCASE("not a regular file") {
      TlsFiles f = good;
      f.ca = "/dev/zero";  // OpenSSL would read it forever
      std::string e = error(f);
      CHECK(e.find("PSTRAIN_TLS_CA file '/dev/zero' is not a regular file") != std::string::npos);
    }
    SUBCASE("an encrypted key is refused, not prompted for") {
      TlsFiles f = good;
      f.key = (certs.dir / "encrypted.key").string();
      REQUIRE(std::system(("openssl pkey -in " + good.key + " -aes128 -passout pass:secret -out " +
                           f.key + " 2>/dev/null")
                              .c_str()) == 0);
      std::string e = error(f);
      CHECK(e.find("is not an unencrypted PEM private key") != std::string::npos);
    }
    SUBCASE("the key of another certificate") {
      TlsFiles f = good;
      f.key = certs.Files("cluster", "b").key;
      std::string e = error(f);
      CHECK(e.find("does not match the certificate") != std::string::npos);
      CHECK(e.find(f.key) != std::string::npos);
    }
    SUBCASE("a key where the certificate belongs") {
      TlsFiles f = good;
      f.cert = good.key;
      std::string e = error(f);
      CHECK(e.find("PSTRAIN_TLS_CERT") != std::string::npos);
      CHECK(e.find(f.cert) != std::string::npos);
    }
    SUBCASE("an expired certificate") {
      // Signed by the cluster's CA, valid in January 2020 only.
      const std::string script =
          (fs::path(PSTRAIN_CERT_SCRIPT).parent_path() / "make_expired_cert.sh").string();
      const std::string dir = (certs.dir / "cluster").string();
      REQUIRE(std::system(("sh " + script + " " + dir + " old").c_str()) == 0);
      TlsFiles f = certs.Files("cluster", "old");
      std::string e = error(f);
      CHECK(e.find("PSTRAIN_TLS_CERT file '" + f.cert + "': the certificate has expired") !=
            std::string::npos);
      CHECK(e.find("valid from 2020-01-01 00:00:00 UTC to 2020-02-01 00:00:00 UTC") !=
            std::string::npos);
    }
    SUBCASE("a key where the CA belongs") {
      TlsFiles f = good;
      f.ca = good.key;
      std::string e = error(f);
      CHECK(e.find("PSTRAIN_TLS_CA") != std::string::npos);
      CHECK(e.find(f.ca) != std::string::npos);
    }
  }

  // Over real sockets: a loop whose connections all speak TLS, and a client
  // that calls it at once, before its handshake can have ended.
  struct EchoServer {
    EventLoop loop;
    std::shared_ptr<testing::CaptureSink> sink = std::make_shared<testing::CaptureSink>();
    Listener listener{&loop, testing::CaptureLogger("server", sink)};
    uint16_t port = 0;

    explicit EchoServer(std::shared_ptr<TlsContext> tls) {
      loop.set_tls(std::move(tls));
      REQUIRE(loop.Start().ok());
      auto bound = loop.Call<StatusOr<uint16_t>>(
          [&] {
            // Answers a push with a pull reply carrying the same bytes.
            return listener.Listen("127.0.0.1", 0, [](Connection::Ptr c) {
              c->Start(
                  [](const Connection::Ptr& conn, Incoming&& in) {
                    Payload echo{in.payload.data, in.payload.size, in.payload.owner};
                    conn->Reply(in.message.request_id, PullReply{7}, std::move(echo));
                  },
                  [](const Connection::Ptr&, const Status&) {});
            });
          },
          Aborted("stopped"));
      REQUIRE(bound.ok());
      port = *bound;
    }
    ~EchoServer() { CHECK(loop.Stop().ok()); }
  };

  // Pushes `size` patterned bytes from a loop with `tls` (null: plaintext) to
  // `port` and reads the echo straight into its own buffer: OK when every
  // byte came back.
  Status EchoThrough(std::shared_ptr<TlsContext> tls, uint16_t port, size_t size) {
    EventLoop loop;
    loop.set_tls(std::move(tls));
    if (Status st = loop.Start(); !st.ok()) return st;
    auto sent = std::make_shared<std::vector<uint8_t>>(size);
    for (size_t i = 0; i < size; ++i) (*sent)[i] = static_cast<uint8_t>(i * 13 + (i >> 12));
    std::vector<uint8_t> back(size);
    std::promise<Status> done;
    loop.Post([&] {
      Connection::Connect(
          &loop, MakeLogger("client"), "127.0.0.1", port, [&](StatusOr<Connection::Ptr> conn) {
            if (!conn.ok()) return done.set_value(conn.status());
            (*conn)->Start([](const Connection::Ptr&, Incoming&&) {},
                           [](const Connection::Ptr&, const Status&) {});
            (*conn)->Call(
                PushRequest{"w"}, [&](StatusOr<Incoming> reply) { done.set_value(reply.status()); },
                Payload{sent->data(), sent->size(), sent},
                Buffer{back.data(), back.size(), nullptr});
          });
    });
    std::future<Status> result = done.get_future();
    Status st = result.wait_for(std::chrono::seconds(60)) == std::future_status::ready
                    ? result.get()
                    : DeadlineExceeded("no answer within 60 s");
    if (Status stopped = loop.Stop(); !stopped.ok()) return stopped;
    if (st.ok() && back != *sent) return Internal("the echo differs from what was sent");
    return st;
  }

  TEST_CASE("tls: connections carry frames sent before the handshake ended, 64 MiB included") {
    const Certs& certs = TestCerts();
    EchoServer server(Context(certs.Files("cluster", "b")));
    auto client = Context(certs.Files("cluster", "a"));
    Status small = EchoThrough(client, server.port, 1000);
    CHECK_MESSAGE(small.ok(), small.message());
    Status large = EchoThrough(client, server.port, size_t{64} << 20);
    CHECK_MESSAGE(large.ok(), large.message());
  }

  TEST_CASE("tls: a plaintext client and a stranger are refused; the server goes on") {
    const Certs& certs = TestCerts();
    EchoServer server(Context(certs.Files("cluster", "b")));
    CHECK_FALSE(EchoThrough(nullptr, server.port, 1000).ok());
    CHECK(server.sink->WaitFor("TLS handshake with 127.0.0.1:"));
    TlsFiles stranger = certs.Files("other", "stranger");
    stranger.ca = certs.Files("cluster", "a").ca;
    // The stranger hears the refusal as final (the alert), not as a
    // connection to try again.
    Status refused = EchoThrough(Context(stranger), server.port, 1000);
    CHECK_MESSAGE(refused.code() == StatusCode::kPermissionDenied, refused.message());
    CHECK(server.sink->WaitFor("certificate verify failed"));
    Status member = EchoThrough(Context(certs.Files("cluster", "a")), server.port, 1000);
    CHECK_MESSAGE(member.ok(), member.message());
  }

}  // TEST_SUITE

}  // namespace
}  // namespace pstrain
