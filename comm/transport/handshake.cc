#include "comm/transport/handshake.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace pstrain {
namespace {

constexpr char kDomainLabel[] = "pstrain-auth-v1";

}  // namespace

StatusOr<Handshake::Nonce> Handshake::FreshNonce() {
  Nonce nonce;
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1)
    return Internal("RAND_bytes failed: no randomness for the handshake nonce");
  return nonce;
}

Handshake::Handshake(HandshakeRole role, std::string token, const Nonce& nonce)
    : role_(role), token_(std::move(token)), nonce_(nonce) {}

// The token's copy does not outlive the handshake in freed memory.
Handshake::~Handshake() {
  if (!token_.empty()) OPENSSL_cleanse(token_.data(), token_.size());
}

AuthHello Handshake::Hello() const { return AuthHello{kHandshakeVersion, nonce_, !token_.empty()}; }

HandshakeRole Handshake::peer_role() const {
  return role_ == HandshakeRole::kConnector ? HandshakeRole::kAcceptor : HandshakeRole::kConnector;
}

std::array<uint8_t, kAuthMacBytes> Handshake::Mac(const std::string& token, HandshakeRole sender,
                                                  const Nonce& sender_nonce,
                                                  const Nonce& receiver_nonce) {
  std::vector<uint8_t> message(kDomainLabel, kDomainLabel + sizeof(kDomainLabel) - 1);
  message.push_back(static_cast<uint8_t>(sender));
  message.insert(message.end(), sender_nonce.begin(), sender_nonce.end());
  message.insert(message.end(), receiver_nonce.begin(), receiver_nonce.end());
  std::array<uint8_t, kAuthMacBytes> mac{};
  unsigned int length = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), message.data(), message.size(),
       mac.data(), &length);
  return mac;
}

Status Handshake::Fail(Status why) {
  state_ = State::kFailed;
  failure_ = std::move(why);
  return failure_;
}

StatusOr<std::vector<MessageBody>> Handshake::Receive(const Message& message) {
  const MessageBody& in = message.body;
  if (state_ != State::kFailed && (message.is_reply || message.request_id != 0))
    return Fail(InvalidArgument(fmt::format("{} sent as a request or reply (request id {})",
                                            MessageName(in), message.request_id)));
  if (auto* refused = std::get_if<ErrorReply>(&in); refused && state_ != State::kFailed)
    return Fail(InvalidArgument(fmt::format("the peer refused: {}", refused->message)));
  switch (state_) {
    case State::kFailed:
      return failure_;
    case State::kDone:
      return Fail(
          InvalidArgument(fmt::format("{} after the handshake was complete", MessageName(in))));
    case State::kAwaitHello:
      if (auto* hello = std::get_if<AuthHello>(&in)) return OnHello(*hello);
      return Fail(InvalidArgument(
          fmt::format("expected AuthHello, got {} (a peer that does not speak the handshake?)",
                      MessageName(in))));
    case State::kAwaitProof:
      if (auto* proof = std::get_if<AuthProof>(&in)) {
        PSTRAIN_RETURN_IF_ERROR(OnProof(*proof));
        // 3. The acceptor proves itself only to a peer that proved first.
        if (role_ == HandshakeRole::kConnector) return std::vector<MessageBody>{};
        return std::vector<MessageBody>{AuthProof{Mac(token_, role_, nonce_, peer_nonce_)}};
      }
      return Fail(InvalidArgument(fmt::format(
          "peer sent no proof but MS_CLUSTER_TOKEN is set (it sent {})", MessageName(in))));
  }
  return Fail(Internal("handshake in an unknown state"));
}

StatusOr<std::vector<MessageBody>> Handshake::ReceiveHeader(const uint8_t* data, size_t size) {
  if (state_ == State::kFailed) return failure_;
  auto message = DecodeHeader(data, size);
  if (!message.ok()) return Fail(message.status());
  return Receive(*message);
}

StatusOr<std::vector<MessageBody>> Handshake::OnHello(const AuthHello& hello) {
  if (hello.version != kHandshakeVersion)
    return Fail(InvalidArgument(fmt::format("peer speaks handshake version {}, this build {}",
                                            hello.version, kHandshakeVersion)));
  if (CRYPTO_memcmp(hello.nonce.data(), nonce_.data(), nonce_.size()) == 0)
    return Fail(InvalidArgument("peer sent this side's own nonce back (a reflected AuthHello)"));
  peer_nonce_ = hello.nonce;
  if (token_.empty()) {
    if (hello.proves)
      return Fail(InvalidArgument(
          "peer proves a MS_CLUSTER_TOKEN but MS_CLUSTER_TOKEN is not set on this side"));
    state_ = State::kDone;
    return std::vector<MessageBody>{};
  }
  if (!hello.proves)
    return Fail(InvalidArgument(
        "peer sent no proof but MS_CLUSTER_TOKEN is set (its AuthHello says it has no token)"));
  state_ = State::kAwaitProof;
  if (role_ == HandshakeRole::kAcceptor) return std::vector<MessageBody>{};
  return std::vector<MessageBody>{AuthProof{Mac(token_, role_, nonce_, peer_nonce_)}};
}

Status Handshake::OnProof(const AuthProof& proof) {
  const auto expected = Mac(token_, peer_role(), peer_nonce_, nonce_);
  if (CRYPTO_memcmp(expected.data(), proof.mac.data(), expected.size()) != 0)
    return Fail(InvalidArgument("proof does not match MS_CLUSTER_TOKEN"));
  state_ = State::kDone;
  return Status::OK();
}

}  // namespace pstrain
