// TakePullReply (comm/ps/pull_reply.h) fed arbitrary replies, as a worker
// takes a compressed pull's answer from a server (seeds: exact-value
// messages of the encoder and a dense reply, corpus/pull_reply_fuzz/).
// Byte 0 picks the reply's encoding (bit 0: threshold), whether the pull
// named a previous reply (bit 1) and a zero seq (bit 2); bytes 1-2 the
// partition's elements (1..kMaxN); the rest is the payload.
// Beyond the sanitizers:
//   - an error leaves the copy untouched, bit for bit, and is one line;
//   - a taken dense reply is the payload; a taken threshold reply is a
//     values message (format 3 or 4) and the copy is the previous one plus
//     exactly its values.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "comm/ps/pull_reply.h"
#include "optim/threshold_codec.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

constexpr int64_t kMaxN = 1 << 12;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  if (size < 3) return 0;
  PullReply reply;
  reply.encoding = (data[0] & 1) ? PushEncoding::kThreshold : PushEncoding::kDense;
  const bool had_view = (data[0] & 2) != 0;
  reply.seq = (data[0] & 4) ? 0 : 7;
  const int64_t n = 1 + (int64_t{data[1]} | int64_t{data[2]} << 8) % kMaxN;
  const uint8_t* payload = data + 3;
  const size_t bytes = size - 3;

  std::vector<float> copy(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) copy[i] = 0.25f * static_cast<float>(i % 9) - 1.0f;
  const std::vector<float> before = copy;
  const Status st = TakePullReply(reply, payload, bytes, n, had_view, copy.data());
  if (!st.ok()) {
    if (std::memcmp(copy.data(), before.data(), copy.size() * sizeof(float)) != 0)
      fuzz::Fail("a refused reply changed the copy", st.message());
    if (st.message().find('\n') != std::string::npos)
      fuzz::Fail("an error of more than one line", st.message());
    return 0;
  }
  if (reply.seq == 0) fuzz::Fail("took a reply that names no view");
  if (reply.encoding == PushEncoding::kDense) {
    if (bytes != copy.size() * sizeof(float) || std::memcmp(copy.data(), payload, bytes) != 0)
      fuzz::Fail("a dense reply taken other than as its payload");
    return 0;
  }
  if (!had_view) fuzz::Fail("took a compressed reply to a pull that held no view");
  if (bytes < kThresholdHeaderBytes ||
      (payload[0] != static_cast<uint8_t>(ThresholdFormat::kValues) &&
       payload[0] != static_cast<uint8_t>(ThresholdFormat::kValuesBitmap)))
    fuzz::Fail("took a compressed reply that is not a values message");
  // Exactly the message's values added, element by element.
  std::vector<float> zero(static_cast<size_t>(n), 0.0f);
  if (!DecodeThresholdAdd(payload, bytes, n, 1.0f, zero.data()).ok())
    fuzz::Fail("took a reply the decoder refuses");
  for (int64_t i = 0; i < n; ++i) {
    const float expected = before[i] + zero[i];
    if (std::memcmp(&copy[i], &expected, sizeof(float)) != 0)
      fuzz::Fail("the copy is not the previous one plus the message's values");
  }
  return 0;
}
