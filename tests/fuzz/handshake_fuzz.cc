// The token handshake (comm/transport/handshake.h) fed what a stranger can send before
// it is authenticated: a sequence of FlatBuffers headers, each as one frame.
// Input: byte 0 picks the side (bit 0: acceptor) and whether this side holds
// a token (bit 1); then frames as [2-byte little-endian length][bytes].
// Beyond the sanitizers: a side holding a token completes only once it has
// received the true MAC (over the Hello's nonce and this side's fixed one;
// the seeds carry it), a failed handshake stays failed, and no call answers
// with more than one message.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "comm/transport/handshake.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  if (size == 0) return 0;
  const auto role = (data[0] & 1) ? HandshakeRole::kAcceptor : HandshakeRole::kConnector;
  const bool with_token = (data[0] & 2) != 0;
  Handshake::Nonce nonce{};
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(i * 7 + 1);
  Handshake handshake(role, with_token ? "fuzz-token" : "", nonce);
  (void)handshake.Hello();
  std::optional<std::array<uint8_t, kAuthMacBytes>> true_mac;
  bool proved = false;
  size_t at = 1;
  for (int frames = 0; frames < 64 && at + 2 <= size; ++frames) {
    const size_t n = std::min<size_t>(data[at] | (data[at + 1] << 8), size - at - 2);
    at += 2;
    // Aligned as a received header is (the frame reader's vector).
    std::vector<uint8_t> header(data + at, data + at + n);
    at += n;
    if (auto m = DecodeHeader(header.data(), header.size()); m.ok()) {
      if (auto* hello = std::get_if<AuthHello>(&m->body)) {
        Handshake::Nonce theirs{};
        std::copy(hello->nonce.begin(), hello->nonce.end(), theirs.begin());
        const auto peer =
            role == HandshakeRole::kAcceptor ? HandshakeRole::kConnector : HandshakeRole::kAcceptor;
        true_mac = Handshake::Mac("fuzz-token", peer, theirs, nonce);
      } else if (auto* proof = std::get_if<AuthProof>(&m->body)) {
        proved = proved || (true_mac && proof->mac == *true_mac);
      }
    }
    const bool was_failed = handshake.failed();
    auto answer = handshake.ReceiveHeader(header.data(), header.size());
    if (was_failed && answer.ok()) fuzz::Fail("a failed handshake answered again");
    if (answer.ok() && answer->size() > 1) fuzz::Fail("more than one message in answer");
    if (!answer.ok() && answer.status().message().empty()) fuzz::Fail("an error without a message");
    if (with_token && handshake.done() && !proved)
      fuzz::Fail("authenticated without the token's MAC");
    if (handshake.done() || handshake.failed()) break;
  }
  return 0;
}
