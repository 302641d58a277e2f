// DecodeHeader, the one place wire bytes become messages, fed arbitrary
// FlatBuffers headers (seeds: one encoded header per message type,
// corpus/messages_fuzz/). Beyond the sanitizers: whatever decodes must encode
// again and decode to the same message (compared through its encoding), so
// no field is accepted that the encoder cannot carry.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/transport/messages.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  // FlatBuffers reads its scalars in place: give it the alignment a received
  // header has (the frame reader's vector), not the fuzzer's offset.
  std::vector<uint8_t> header(data, data + size);
  auto m = DecodeHeader(header.data(), header.size());
  if (!m.ok()) {
    if (m.status().message().empty()) fuzz::Fail("an error without a message");
    return 0;
  }
  (void)MessageName(m->body);
  (void)MayCarryPayload(m->body);
  (void)MayWaitOnOthers(m->body);
  std::vector<uint8_t> once = EncodeHeader(*m);
  auto again = DecodeHeader(once.data(), once.size());
  if (!again.ok())
    fuzz::Fail("a decoded message does not decode once re-encoded:", again.status().message());
  if (EncodeHeader(*again) != once) fuzz::Fail("a decoded message changes when re-encoded");
  return 0;
}
