// FrameReader fed arbitrary bytes, in arbitrary read sizes. The input is the
// byte stream itself (seeds are real frames, corpus/frame_fuzz/); the read
// sizes come from a generator seeded by the input, so each input is replayed
// the same way. Checks, beyond the sanitizers: the frames and the error do not
// depend on how the stream was cut (a reader fed the whole stream at once is
// the reference), and every frame's header goes through DecodeHeader, as the
// transport does.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "comm/transport/frame.h"
#include "comm/transport/messages.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain {
namespace {

// What a reader produced from a stream: frames (header bytes and payload
// bytes), then OK or the error that ended it.
struct Outcome {
  std::vector<std::vector<uint8_t>> headers, payloads;
  bool ok = true;
  std::string error;
};

// Places a pulled-values payload into memory of its own, as Connection::Call
// places a pull reply into its tensor; everything else is left to the reader.
StatusOr<Buffer> Place(const std::vector<uint8_t>& header, uint64_t size) {
  auto m = DecodeHeader(header.data(), header.size());
  if (!m.ok() || !IsPulledValues(m->body) || size > (1u << 20)) return Buffer{};
  auto memory = std::make_shared<std::vector<uint8_t>>(size);
  return Buffer{memory->data(), size, memory};
}

// xorshift64*: read sizes from 1 byte to past the reader's 64 KiB staging.
struct Cuts {
  uint64_t state;
  size_t Next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    uint64_t r = state * 2685821657736338717ull;
    switch (r % 4) {
      case 0:
        return 1 + (r >> 8) % 4;
      case 1:
        return 1 + (r >> 8) % 64;
      case 2:
        return 1 + (r >> 8) % 4096;
      default:
        return 1 + (r >> 8) % 100000;
    }
  }
};

Outcome Run(const uint8_t* data, size_t size, Cuts* cuts) {
  Outcome out;
  FrameReader reader(FrameLimits{}, Place);
  auto on_frame = [&](Frame&& f) {
    auto m = DecodeHeader(f.header.data(), f.header.size());
    if (m.ok() && f.payload.size > 0) (void)MayCarryPayload(m->body);
    out.headers.push_back(std::move(f.header));
    out.payloads.emplace_back(f.payload.data, f.payload.data + f.payload.size);
  };
  for (size_t at = 0; at < size;) {
    size_t n = cuts != nullptr ? std::min(cuts->Next(), size - at) : size - at;
    Status st = reader.Feed(data + at, n, on_frame);
    at += n;
    if (!st.ok()) {
      out.ok = false;
      out.error = st.message();
      break;  // the reader must not be used after an error
    }
  }
  return out;
}

}  // namespace
}  // namespace pstrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  uint64_t seed = 1469598103934665603ull;  // FNV-1a of the input
  for (size_t i = 0; i < size; ++i) seed = (seed ^ data[i]) * 1099511628211ull;
  Outcome whole = Run(data, size, nullptr);
  Cuts cuts{seed | 1};
  Outcome cut = Run(data, size, &cuts);
  if (whole.ok != cut.ok || whole.error != cut.error)
    fuzz::Fail("the outcome depends on the read sizes:", whole.error + " vs " + cut.error);
  if (whole.headers != cut.headers || whole.payloads != cut.payloads)
    fuzz::Fail("the frames depend on the read sizes");
  return 0;
}
