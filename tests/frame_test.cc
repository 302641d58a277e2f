// Framing: round trips through the FrameReader at every split of the stream,
// and rejection (not a crash) of frames that are wrong in any way.
#include "comm/transport/frame.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <new>
#include <random>

#include "comm/transport/messages.h"

namespace pstrain {
namespace {

std::vector<uint8_t> MakeFrame(const Message& m, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> header = EncodeHeader(m);
  std::vector<uint8_t> out(kFixedHeaderBytes);
  EncodeFixedHeader(static_cast<uint32_t>(header.size()), payload.size(), out.data());
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::vector<uint8_t> Bytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(gen());
  return b;
}

// Feeds `stream` in chunks of `chunk` bytes; returns the frames decoded.
StatusOr<std::vector<Frame>> FeedAll(const std::vector<uint8_t>& stream, size_t chunk,
                                     FrameLimits limits = {}) {
  FrameReader reader(limits);
  std::vector<Frame> frames;
  for (size_t at = 0; at < stream.size(); at += chunk) {
    size_t n = std::min(chunk, stream.size() - at);
    Status st =
        reader.Feed(stream.data() + at, n, [&](Frame&& f) { frames.push_back(std::move(f)); });
    if (!st.ok()) return st;
  }
  return frames;
}

Message Shutdown42() { return Message{42, false, Shutdown{"done"}}; }

TEST_CASE("frames round-trip whatever the read sizes") {
  std::vector<uint8_t> small = Bytes(100, 1), large = Bytes(300 * 1024, 2);
  std::vector<uint8_t> stream = MakeFrame(Shutdown42(), {});
  for (auto* payload : {&small, &large}) {
    auto f = MakeFrame(Message{7, true, Ack{}}, *payload);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  for (size_t chunk :
       {size_t{1}, size_t{3}, size_t{20}, size_t{4096}, size_t{70000}, stream.size()}) {
    CAPTURE(chunk);
    auto frames = FeedAll(stream, chunk);
    REQUIRE(frames.ok());
    REQUIRE(frames->size() == 3);
    auto first = DecodeHeader((*frames)[0].header.data(), (*frames)[0].header.size());
    REQUIRE(first.ok());
    CHECK(first->request_id == 42);
    CHECK(std::get<Shutdown>(first->body).reason == "done");
    CHECK((*frames)[0].payload.size == 0);
    CHECK((*frames)[1].payload.size == small.size());
    CHECK(std::memcmp((*frames)[1].payload.data, small.data(), small.size()) == 0);
    CHECK((*frames)[2].payload.size == large.size());
    CHECK(std::memcmp((*frames)[2].payload.data, large.data(), large.size()) == 0);
  }
}

TEST_CASE("a placer puts the payload straight into the caller's memory") {
  std::vector<uint8_t> payload = Bytes(200 * 1024, 6);
  std::vector<uint8_t> stream = MakeFrame(Shutdown42(), payload);
  std::vector<uint8_t> target(payload.size());
  FrameReader reader({}, [&](const std::vector<uint8_t>&, uint64_t size) -> StatusOr<Buffer> {
    REQUIRE(size == target.size());
    return Buffer{target.data(), target.size(), nullptr};
  });
  int frames = 0;
  REQUIRE(reader
              .Feed(stream.data(), stream.size(),
                    [&](Frame&& f) {
                      CHECK(f.payload.data == target.data());
                      ++frames;
                    })
              .ok());
  CHECK(frames == 1);
  CHECK(target == payload);
}

TEST_CASE("a truncated frame yields nothing until the rest arrives") {
  std::vector<uint8_t> stream = MakeFrame(Shutdown42(), Bytes(1000, 3));
  FrameReader reader;
  int frames = 0;
  auto count = [&](Frame&&) { ++frames; };
  REQUIRE(reader.Feed(stream.data(), stream.size() - 1, count).ok());
  CHECK(frames == 0);
  REQUIRE(reader.Feed(stream.data() + stream.size() - 1, 1, count).ok());
  CHECK(frames == 1);
}

TEST_CASE("fixed headers that are wrong are rejected with the reason") {
  std::vector<uint8_t> good = MakeFrame(Shutdown42(), {});
  struct Case {
    const char* name;
    size_t offset;
    uint8_t value;
    const char* reason;
  };
  for (const Case& c : {Case{"magic", 0, 'X', "magic"}, Case{"version", 4, 9, "version 9"},
                        Case{"flags", 6, 1, "flags"}, Case{"header size", 11, 0x7f, "header"},
                        Case{"payload size", 19, 0x7f, "exceeds the limit"}}) {
    CAPTURE(c.name);
    std::vector<uint8_t> bad = good;
    bad[c.offset] = c.value;
    auto frames = FeedAll(bad, bad.size());
    REQUIRE_FALSE(frames.ok());
    CHECK(frames.status().message().find(c.reason) != std::string::npos);
  }
  std::vector<uint8_t> empty_header(kFixedHeaderBytes);
  EncodeFixedHeader(0, 0, empty_header.data());
  CHECK_FALSE(FeedAll(empty_header, 5).ok());
}

TEST_CASE("the payload limit is configurable") {
  std::vector<uint8_t> stream = MakeFrame(Shutdown42(), Bytes(2000, 4));
  CHECK_FALSE(FeedAll(stream, 64, FrameLimits{1 << 20, 1000}).ok());
  CHECK(FeedAll(stream, 64, FrameLimits{1 << 20, 2000}).ok());
}

TEST_CASE("random bytes never crash the reader or the decoder") {
  std::mt19937 gen(5);
  int rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> stream = Bytes(1 + gen() % 512, trial);
    if (trial % 2 == 0) {  // a valid fixed header over a random FlatBuffers header
      size_t header = stream.size();
      stream.insert(stream.begin(), kFixedHeaderBytes, 0);
      EncodeFixedHeader(static_cast<uint32_t>(header), 0, stream.data());
    }
    auto frames = FeedAll(stream, 1 + gen() % 64, FrameLimits{4096, 4096});
    if (!frames.ok()) {
      ++rejected;
      continue;
    }
    for (const Frame& f : *frames) rejected += !DecodeHeader(f.header.data(), f.header.size()).ok();
  }
  CHECK(rejected > 900);  // nearly every random stream is refused somewhere
}

// Memory follows the bytes that arrived, not the sizes a peer announced.

// The fixed header alone, announcing `header_len` and `payload_len`.
std::vector<uint8_t> FixedHeader(uint32_t header_len, uint64_t payload_len) {
  std::vector<uint8_t> out(kFixedHeaderBytes);
  EncodeFixedHeader(header_len, payload_len, out.data());
  return out;
}

constexpr uint64_t kStagingAtMost = 64 * 1024;

TEST_CASE("an announced header takes no memory until its bytes arrive") {
  FrameReader reader;
  auto none = [](Frame&&) { FAIL("no frame expected"); };
  std::vector<uint8_t> fixed = FixedHeader(1 << 20, 0);
  REQUIRE(reader.Feed(fixed.data(), fixed.size(), none).ok());
  CHECK(reader.reserved_bytes() <= 8 * 1024);  // the staging buffer only
  std::vector<uint8_t> some = Bytes(3000, 8);
  REQUIRE(reader.Feed(some.data(), some.size(), none).ok());
  CHECK(reader.reserved_bytes() <= 8 * 1024 + 2 * some.size());
}

TEST_CASE("a 2 GiB payload announced with 20 bytes sent costs little") {
  std::vector<uint8_t> payload = Bytes(20, 9);
  std::vector<uint8_t> stream = MakeFrame(Message{1, false, PushRequest{"w", 0, 0, 1}}, payload);
  EncodeFixedHeader(static_cast<uint32_t>(stream.size() - kFixedHeaderBytes - payload.size()),
                    uint64_t{2} << 30, stream.data());
  FrameReader reader(FrameLimits{1 << 20, uint64_t{2} << 30});
  REQUIRE(reader.Feed(stream.data(), stream.size(), [](Frame&&) { FAIL("incomplete"); }).ok());
  CHECK(reader.reserved_bytes() < kStagingAtMost + 32 * 1024);
}

TEST_CASE("payload memory grows with the bytes that arrive, at most 4x over") {
  const uint64_t announced = uint64_t{64} << 20;
  std::vector<uint8_t> head = MakeFrame(Shutdown42(), {});
  EncodeFixedHeader(static_cast<uint32_t>(head.size() - kFixedHeaderBytes), announced, head.data());
  FrameReader reader(FrameLimits{1 << 20, announced});
  auto none = [](Frame&&) { FAIL("incomplete"); };
  REQUIRE(reader.Feed(head.data(), head.size(), none).ok());
  std::vector<uint8_t> chunk = Bytes(100 * 1024, 10);
  uint64_t sent = 0;
  for (int i = 0; i < 20; ++i) {
    REQUIRE(reader.Feed(chunk.data(), chunk.size(), none).ok());
    sent += chunk.size();
    CAPTURE(sent);
    CHECK(reader.reserved_bytes() <= 4 * sent + kStagingAtMost + 16 * 1024);
  }
}

TEST_CASE("a frame that grew arrives intact and its memory serves the next of about its size") {
  std::vector<uint8_t> payload = Bytes(3 << 20, 11);  // grows through several sizes
  std::vector<uint8_t> frame = MakeFrame(Message{7, true, Ack{}}, payload);
  FrameReader reader;
  std::vector<Frame> frames;
  auto keep = [&](Frame&& f) { frames.push_back(std::move(f)); };
  // Uneven pieces, so that growth happens both in direct reads and while
  // copying out of the staging buffer.
  for (size_t at = 0, piece = 1000; at < frame.size(); at += piece, piece = piece * 3 % 300007)
    REQUIRE(reader.Feed(frame.data() + at, std::min(piece, frame.size() - at), keep).ok());
  REQUIRE(frames.size() == 1);
  REQUIRE(frames[0].payload.size == payload.size());
  CHECK(std::memcmp(frames[0].payload.data, payload.data(), payload.size()) == 0);
  const uint8_t* first = frames[0].payload.data;
  frames.clear();  // the payload's memory goes back to the reader's pool
  REQUIRE(reader.Feed(frame.data(), frame.size(), keep).ok());
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].payload.data == first);
  CHECK(std::memcmp(frames[0].payload.data, payload.data(), payload.size()) == 0);
  // A slightly smaller payload (a batch's rows vary) reuses it too.
  frames.clear();
  std::vector<uint8_t> smaller(payload.begin(), payload.end() - 4000);
  std::vector<uint8_t> next = MakeFrame(Message{8, true, Ack{}}, smaller);
  REQUIRE(reader.Feed(next.data(), next.size(), keep).ok());
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].payload.data == first);
  CHECK(frames[0].payload.size == smaller.size());
  CHECK(std::memcmp(frames[0].payload.data, smaller.data(), smaller.size()) == 0);
}

TEST_CASE("an allocation failure while reading a frame is an error, not an exception") {
  std::vector<uint8_t> stream = MakeFrame(Shutdown42(), Bytes(100, 12));
  FrameReader reader({}, [](const std::vector<uint8_t>&, uint64_t) -> StatusOr<Buffer> {
    throw std::bad_alloc();
  });
  Status st = reader.Feed(stream.data(), stream.size(), [](Frame&&) { FAIL("no frame"); });
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("no memory") != std::string::npos);
}

// Not a pass/fail check (machines differ): how fast large frames go through
// the reader from memory, the first frame of a size (growing) and later ones
// (pooled), for comparing builds.
TEST_CASE("large frame throughput") {
  for (uint64_t size : {uint64_t{4} << 20, uint64_t{64} << 20}) {
    std::vector<uint8_t> frame = MakeFrame(Message{7, true, Ack{}}, Bytes(size, 13));
    for (bool fresh : {true, false}) {
      FrameReader reader;
      const int rounds = size > (8 << 20) ? 4 : 32;
      auto start = std::chrono::steady_clock::now();
      int frames = 0;
      for (int r = 0; r < rounds; ++r) {
        if (fresh) reader = FrameReader();
        REQUIRE(reader.Feed(frame.data(), frame.size(), [&](Frame&&) { ++frames; }).ok());
      }
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      CHECK(frames == rounds);
      MESSAGE(fmt::format("{} MiB frames, {}: {:.2f} GB/s", size >> 20,
                          fresh ? "new reader each (growing)" : "one reader (pooled)",
                          rounds * static_cast<double>(frame.size()) / s / 1e9));
    }
  }
}

}  // namespace
}  // namespace pstrain
