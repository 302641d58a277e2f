// Handshake: the first exchange on every connection, which proves that both
// ends know MS_CLUSTER_TOKEN without sending it. A pure state machine (no
// sockets, no clock): messages in, messages out, so it is tested and fuzzed
// on its own; comm/transport/connection.cc drives it with the frames of a connection.
//
// Protocol (frames of comm/transport/wire.fbs):
//   1. Each side sends AuthHello{version, nonce: 32 fresh random bytes,
//      proves: whether it has a token} at once.
//   2. On the peer's AuthHello: the versions must match and the peer's nonce
//      must differ from ours (a reflected Hello). Without a token here: done,
//      unless the peer proves (it expects a proof this side cannot give:
//      fail). With a token: a peer that does not prove fails; otherwise the
//      connector sends AuthProof{mac = HMAC-SHA256(token, "pstrain-auth-v1"
//      || sender's role byte || sender's nonce || receiver's nonce)}.
//   3. The acceptor checks the connector's proof in constant time
//      (CRYPTO_memcmp) and only then sends its own: a stranger who connects
//      to a node never gets a MAC to guess a weak token against offline.
//      Done.
//   4. The connector checks the acceptor's proof. Done.
// A side that fails a check sends Error{which check} before it closes, so
// the peer can tell a refusal from a network failure; an Error received
// during the handshake fails it ("the peer refused: ...").
// The receiver's fresh nonce in every MAC keeps a captured handshake from
// being replayed; the role byte keeps a side's own proof from being reflected
// back to it. This keeps strangers out; it does not protect the traffic from
// an attacker on the path (that is TLS's job, PSTRAIN_TLS_*).
//
// Not thread-safe; one per connection.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/transport/messages.h"
#include "src/common/status.h"

namespace pstrain {

inline constexpr uint32_t kHandshakeVersion = 1;

// Which end of the TCP connection a side is; part of every MAC.
enum class HandshakeRole : uint8_t { kConnector = 0, kAcceptor = 1 };

class Handshake {
 public:
  using Nonce = std::array<uint8_t, kAuthNonceBytes>;
  // 32 bytes from OpenSSL's RAND_bytes; an error if it has no entropy.
  static StatusOr<Nonce> FreshNonce();

  // `token` empty: no proof is given or asked for (Hello exchange only).
  // `nonce` must be fresh (FreshNonce()); tests pass fixed ones.
  Handshake(HandshakeRole role, std::string token, const Nonce& nonce);
  ~Handshake();
  Handshake(const Handshake&) = delete;
  Handshake& operator=(const Handshake&) = delete;

  // The first message to send.
  AuthHello Hello() const;
  // Handles one message received before the handshake completed. Returns
  // what to send in answer (none or one message); an error means the
  // handshake failed and the connection must close: its message names the
  // check that failed ("proof does not match MS_CLUSTER_TOKEN"). Once failed,
  // every later call returns the same error.
  StatusOr<std::vector<MessageBody>> Receive(const Message& in);
  // The same for a frame's FlatBuffers header bytes (decoded first).
  StatusOr<std::vector<MessageBody>> ReceiveHeader(const uint8_t* data, size_t size);

  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kFailed; }

  // HMAC-SHA256 proof that the side `sender` knows `token`. Exposed for tests.
  static std::array<uint8_t, kAuthMacBytes> Mac(const std::string& token, HandshakeRole sender,
                                                const Nonce& sender_nonce,
                                                const Nonce& receiver_nonce);

 private:
  enum class State { kAwaitHello, kAwaitProof, kDone, kFailed };
  StatusOr<std::vector<MessageBody>> OnHello(const AuthHello& hello);
  Status OnProof(const AuthProof& proof);
  Status Fail(Status why);
  HandshakeRole peer_role() const;

  const HandshakeRole role_;
  std::string token_;
  const Nonce nonce_;
  Nonce peer_nonce_{};
  State state_ = State::kAwaitHello;
  Status failure_;
};

}  // namespace pstrain
