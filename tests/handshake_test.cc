// The handshake state machine (comm/transport/handshake.h) on its own: messages pass
// between two Handshake objects as frame header bytes, as they would on a
// connection. A test per check: right token, wrong token, token on one side,
// replay, reflection, and junk.
#include "comm/transport/handshake.h"

#include <doctest/doctest.h>

#include <chrono>
#include <deque>

namespace pstrain {
namespace {

using Bytes = std::vector<uint8_t>;

Handshake::Nonce MakeNonce(uint8_t seed) {
  Handshake::Nonce n;
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(seed * 31 + i);
  return n;
}

Bytes Encode(const MessageBody& body) { return EncodeHeader(Message{0, false, body}); }

// Both ends' outcome, and every frame each sent (what a wire tap would see).
struct Outcome {
  Status connector, acceptor;
  std::vector<Bytes> from_connector, from_acceptor;
};

// Runs two handshakes against each other until neither has more to say.
Outcome Run(Handshake& connector, Handshake& acceptor) {
  Outcome out;
  std::deque<Bytes> to_acceptor{Encode(connector.Hello())}, to_connector{Encode(acceptor.Hello())};
  out.from_connector.push_back(to_acceptor.front());
  out.from_acceptor.push_back(to_connector.front());
  auto deliver = [](Handshake& h, std::deque<Bytes>& in, std::deque<Bytes>& reply,
                    std::vector<Bytes>& sent, Status& status) {
    Bytes frame = std::move(in.front());
    in.pop_front();
    if (!status.ok()) return;  // a failed side has closed: it reads no more
    auto answer = h.ReceiveHeader(frame.data(), frame.size());
    if (!answer.ok()) {
      status = answer.status();
      return;
    }
    for (const MessageBody& m : *answer) {
      reply.push_back(Encode(m));
      sent.push_back(reply.back());
    }
  };
  for (int rounds = 0; rounds < 10 && (!to_acceptor.empty() || !to_connector.empty()); ++rounds) {
    if (!to_acceptor.empty())
      deliver(acceptor, to_acceptor, to_connector, out.from_acceptor, out.acceptor);
    if (!to_connector.empty())
      deliver(connector, to_connector, to_acceptor, out.from_connector, out.connector);
  }
  if (out.connector.ok() && !connector.done()) out.connector = Internal("connector not done");
  if (out.acceptor.ok() && !acceptor.done()) out.acceptor = Internal("acceptor not done");
  return out;
}

bool Contains(const Status& st, const std::string& text) {
  return st.message().find(text) != std::string::npos;
}

TEST_CASE("the same token on both sides: both are done, and the token never travels") {
  Handshake c(HandshakeRole::kConnector, "s3cret-token", MakeNonce(1));
  Handshake a(HandshakeRole::kAcceptor, "s3cret-token", MakeNonce(2));
  Outcome out = Run(c, a);
  CHECK(out.connector.ok());
  CHECK(out.acceptor.ok());
  CHECK(out.from_connector.size() == 2);  // AuthHello, AuthProof
  CHECK(out.from_acceptor.size() == 2);
  const std::string token = "s3cret-token";
  for (const auto* frames : {&out.from_connector, &out.from_acceptor})
    for (const Bytes& f : *frames)
      CHECK(std::search(f.begin(), f.end(), token.begin(), token.end()) == f.end());
}

TEST_CASE("no token on either side: the Hello exchange alone completes") {
  Handshake c(HandshakeRole::kConnector, "", MakeNonce(1));
  Handshake a(HandshakeRole::kAcceptor, "", MakeNonce(2));
  Outcome out = Run(c, a);
  CHECK(out.connector.ok());
  CHECK(out.acceptor.ok());
  CHECK(out.from_connector.size() == 1);
}

TEST_CASE("another token: both sides fail on the proof") {
  Handshake c(HandshakeRole::kConnector, "guess", MakeNonce(1));
  Handshake a(HandshakeRole::kAcceptor, "s3cret", MakeNonce(2));
  Outcome out = Run(c, a);
  CHECK(Contains(out.acceptor, "proof does not match MS_CLUSTER_TOKEN"));
  // The acceptor sent no proof back; the connection's refusal (an Error,
  // comm/transport/connection.cc) tells the connector.
  CHECK(out.from_acceptor.size() == 1);
  auto refused = c.Receive(Message{0, false, ErrorReply{out.acceptor.message()}});
  CHECK(Contains(refused.status(), "proof does not match MS_CLUSTER_TOKEN"));
  CHECK(c.failed());
  CHECK(a.failed());
}

TEST_CASE("a token on one side only: both sides fail, each naming its check") {
  SUBCASE("the acceptor has it") {
    Handshake c(HandshakeRole::kConnector, "", MakeNonce(1));
    Handshake a(HandshakeRole::kAcceptor, "s3cret", MakeNonce(2));
    Outcome out = Run(c, a);
    CHECK(Contains(out.acceptor, "peer sent no proof but MS_CLUSTER_TOKEN is set"));
    CHECK(Contains(out.connector, "MS_CLUSTER_TOKEN is not set on this side"));
  }
  SUBCASE("the connector has it") {
    Handshake c(HandshakeRole::kConnector, "s3cret", MakeNonce(1));
    Handshake a(HandshakeRole::kAcceptor, "", MakeNonce(2));
    Outcome out = Run(c, a);
    CHECK(Contains(out.connector, "peer sent no proof but MS_CLUSTER_TOKEN is set"));
    CHECK(Contains(out.acceptor, "MS_CLUSTER_TOKEN is not set on this side"));
  }
}

TEST_CASE("a peer that claims a proof but sends another message instead fails") {
  Handshake a(HandshakeRole::kAcceptor, "s3cret", MakeNonce(2));
  REQUIRE(a.Receive(Message{0, false, AuthHello{kHandshakeVersion, MakeNonce(1), true}}).ok());
  auto st = a.Receive(Message{0, false, PullRequest{"w", 0, 0, 0, 0}});
  REQUIRE_FALSE(st.ok());
  CHECK(Contains(st.status(), "peer sent no proof but MS_CLUSTER_TOKEN is set"));
  // Once failed, it stays failed.
  CHECK_FALSE(a.Receive(Message{0, false, AuthProof{}}).ok());
}

TEST_CASE("a captured handshake replayed to a new acceptor fails: its nonce is fresh") {
  Handshake c(HandshakeRole::kConnector, "s3cret", MakeNonce(1));
  Handshake a(HandshakeRole::kAcceptor, "s3cret", MakeNonce(2));
  Outcome captured = Run(c, a);
  REQUIRE(captured.acceptor.ok());
  REQUIRE(captured.from_connector.size() == 2);

  Handshake fresh(HandshakeRole::kAcceptor, "s3cret", MakeNonce(3));
  const Bytes& hello = captured.from_connector[0];
  const Bytes& proof = captured.from_connector[1];
  auto answer = fresh.ReceiveHeader(hello.data(), hello.size());
  REQUIRE(answer.ok());
  auto replayed = fresh.ReceiveHeader(proof.data(), proof.size());
  REQUIRE_FALSE(replayed.ok());
  CHECK(Contains(replayed.status(), "proof does not match MS_CLUSTER_TOKEN"));
  CHECK_FALSE(fresh.done());
}

TEST_CASE("a side's own proof reflected back to it fails: the MAC names the sender's role") {
  // An attacker posing as a node the connector dials sends a Hello, gets
  // the connector's proof and sends it back as its own.
  Handshake c(HandshakeRole::kConnector, "s3cret", MakeNonce(1));
  auto answer = c.Receive(Message{0, false, AuthHello{kHandshakeVersion, MakeNonce(9), true}});
  REQUIRE(answer.ok());
  REQUIRE(answer->size() == 1);
  auto* own = std::get_if<AuthProof>(&answer->front());
  REQUIRE(own != nullptr);
  auto reflected = c.Receive(Message{0, false, *own});
  REQUIRE_FALSE(reflected.ok());
  CHECK(Contains(reflected.status(), "proof does not match MS_CLUSTER_TOKEN"));

  // The MAC of the same nonces differs by role, so no role's proof serves
  // for the other.
  CHECK(Handshake::Mac("t", HandshakeRole::kConnector, MakeNonce(1), MakeNonce(2)) !=
        Handshake::Mac("t", HandshakeRole::kAcceptor, MakeNonce(1), MakeNonce(2)));
}

TEST_CASE("an acceptor proves itself only to a peer that proved first") {
  // A stranger who connects gets no MAC to guess a weak token against.
  Handshake a(HandshakeRole::kAcceptor, "s3cret", MakeNonce(2));
  auto answer = a.Receive(Message{0, false, AuthHello{kHandshakeVersion, MakeNonce(9), true}});
  REQUIRE(answer.ok());
  CHECK(answer->empty());
  auto wrong = a.Receive(Message{0, false, AuthProof{}});
  REQUIRE_FALSE(wrong.ok());
  CHECK_FALSE(a.done());
}

TEST_CASE("a refusal from the peer fails the handshake, naming its reason") {
  Handshake c(HandshakeRole::kConnector, "guess", MakeNonce(1));
  REQUIRE(c.Receive(Message{0, false, AuthHello{kHandshakeVersion, MakeNonce(2), true}}).ok());
  auto st = c.Receive(Message{0, false, ErrorReply{"proof does not match MS_CLUSTER_TOKEN"}});
  REQUIRE_FALSE(st.ok());
  CHECK(Contains(st.status(), "the peer refused: proof does not match MS_CLUSTER_TOKEN"));
}

TEST_CASE("a reflected AuthHello (this side's own nonce) fails") {
  Handshake a(HandshakeRole::kAcceptor, "s3cret", MakeNonce(2));
  auto st = a.Receive(Message{0, false, a.Hello()});
  REQUIRE_FALSE(st.ok());
  CHECK(Contains(st.status(), "own nonce"));
}

TEST_CASE("anything but the handshake's frames fails, naming what came") {
  Handshake a(HandshakeRole::kAcceptor, "", MakeNonce(2));
  auto st = a.Receive(Message{1, false, RegisterRequest{}});
  REQUIRE_FALSE(st.ok());
  CHECK(Contains(st.status(), "RegisterRequest"));

  Handshake b(HandshakeRole::kAcceptor, "", MakeNonce(2));
  CHECK(Contains(
      b.Receive(Message{0, false, AuthHello{kHandshakeVersion + 1, MakeNonce(1), false}}).status(),
      "handshake version"));

  Handshake c(HandshakeRole::kAcceptor, "s3cret", MakeNonce(2));
  const Bytes junk = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  CHECK_FALSE(c.ReceiveHeader(junk.data(), junk.size()).ok());
  CHECK(c.failed());
}

TEST_CASE("fresh nonces differ") {
  auto n1 = Handshake::FreshNonce();
  auto n2 = Handshake::FreshNonce();
  REQUIRE(n1.ok());
  REQUIRE(n2.ok());
  CHECK(*n1 != *n2);
}

// A measurement, not an assertion: what the handshake's computation costs
// (the network's round trips come on top), with and without a token.
TEST_CASE("1000 handshakes: the cost, with and without a token") {
  for (const std::string token : {"", "s3cret"}) {
    const auto start = std::chrono::steady_clock::now();
    int done = 0;
    for (int i = 0; i < 1000; ++i) {
      auto nc = Handshake::FreshNonce(), na = Handshake::FreshNonce();
      REQUIRE(nc.ok());
      REQUIRE(na.ok());
      Handshake c(HandshakeRole::kConnector, token, *nc);
      Handshake a(HandshakeRole::kAcceptor, token, *na);
      Outcome out = Run(c, a);
      done += out.connector.ok() && out.acceptor.ok();
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    CHECK(done == 1000);
    MESSAGE("1000 handshakes (both sides, frames encoded and decoded) "
            << std::string(token.empty() ? "without" : "with") << " a token: " << us / 1000.0
            << " us each");
  }
}

}  // namespace
}  // namespace pstrain
