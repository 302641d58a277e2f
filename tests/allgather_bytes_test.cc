// Collective::AllGatherBytes on every CPU transport (the TCP ring and the
// shared-memory ring), ranks as threads of this process: every rank gets
// every rank's bytes, bit for bit (bytes that are NaNs as floats included),
// for empty, odd-sized and large messages of different sizes per rank; a
// rank over the size limit fails every rank's call, naming it, and the ring
// stays usable.
#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/collective/local_ring.h"
#include "comm/collective/shm_ring.h"
#include "tests/rank_threads.h"

namespace pstrain {
namespace {

using testing::OnEveryRank;
using testing::RequireAllOk;

// The ranks of one ring, whatever carries them.
struct Ranks {
  std::function<Collective&(int)> rank;
  std::unique_ptr<LocalRing> tcp;
  std::vector<std::unique_ptr<ShmRingCollective>> shm;
};

Ranks TcpRanks(int world) {
  Ranks ranks;
  auto ring = LocalRing::Create(world);
  REQUIRE_MESSAGE(ring.ok(), ring.status().message());
  ranks.tcp = std::move(*ring);
  LocalRing* tcp = ranks.tcp.get();
  ranks.rank = [tcp](int r) -> Collective& { return tcp->rank(r); };
  return ranks;
}

// Small slots, so that large messages span many segments.
Ranks ShmRanks(int world) {
  Ranks ranks;
  for (int r = 0; r < world; ++r) {
    auto ring = ShmRingCollective::Create(r, world, {2, 4096});
    REQUIRE_MESSAGE(ring.ok(), ring.status().message());
    ranks.shm.push_back(std::move(*ring));
  }
  for (int r = 0; r < world; ++r) {
    auto& next = ranks.shm[(r + 1) % world];
    Status st = ranks.shm[r]->ConnectNext(next->inbound_name(), next->inbound_nonce());
    REQUIRE_MESSAGE(st.ok(), st.message());
    next->InboundOpened();
  }
  auto* shm = &ranks.shm;
  ranks.rank = [shm](int r) -> Collective& { return *(*shm)[r]; };
  return ranks;
}

using MakeRanks = Ranks (*)(int);
const std::pair<const char*, MakeRanks> kTransports[] = {{"tcp", TcpRanks}, {"shm", ShmRanks}};

// Rank r's message in case c: sizes differ per rank (empty, odd, large),
// bytes vary with position and rank, and 0xff runs are NaNs as floats.
std::vector<uint8_t> Message(int c, int r) {
  const size_t sizes[] = {0, 1, 3, 7, 4097, (1u << 20) + 3};
  const size_t n = sizes[(c + r) % 6];
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i)
    bytes[i] = (i / 5) % 3 == 0 ? 0xff : static_cast<uint8_t>(i * 31 + r * 7 + c);
  return bytes;
}

TEST_CASE("all-gather of bytes: every rank gets every rank's bytes, on every transport") {
  for (const auto& [name, make] : kTransports) {
    for (int world = 1; world <= 4; ++world) {
      CAPTURE(name);
      CAPTURE(world);
      Ranks ranks = make(world);
      for (int c = 0; c < 6; ++c) {
        CAPTURE(c);
        std::vector<std::vector<std::vector<uint8_t>>> got(world);
        RequireAllOk(OnEveryRank(
            world, [&](int r) { return ranks.rank(r).AllGatherBytes(Message(c, r), &got[r]); }));
        for (int r = 0; r < world; ++r) {
          REQUIRE(got[r].size() == static_cast<size_t>(world));
          for (int q = 0; q < world; ++q) REQUIRE(got[r][q] == Message(c, q));
        }
      }
    }
  }
}

TEST_CASE("all-gather of bytes: all empty") {
  for (const auto& [name, make] : kTransports) {
    CAPTURE(name);
    Ranks ranks = make(3);
    std::vector<std::vector<std::vector<uint8_t>>> got(3);
    RequireAllOk(OnEveryRank(3, [&](int r) { return ranks.rank(r).AllGatherBytes({}, &got[r]); }));
    for (int r = 0; r < 3; ++r) REQUIRE(got[r] == std::vector<std::vector<uint8_t>>(3));
  }
}

TEST_CASE("all-gather of bytes: a rank over the limit fails every rank, naming it") {
  for (const auto& [name, make] : kTransports) {
    CAPTURE(name);
    const int world = 3;
    Ranks ranks = make(world);
    std::vector<std::vector<std::vector<uint8_t>>> got(world);
    const auto results = OnEveryRank(world, [&](int r) {
      const std::vector<uint8_t> mine(r == 1 ? 101 : 100, 7);
      return ranks.rank(r).AllGatherBytes(mine, &got[r], /*max_bytes=*/100);
    });
    for (const Status& st : results) {
      REQUIRE_FALSE(st.ok());
      CHECK(st.message().find("rank 1 has more than 100 bytes") != std::string::npos);
    }
    // Every rank took part in the same operations: the ring goes on.
    RequireAllOk(OnEveryRank(
        world, [&](int r) { return ranks.rank(r).AllGatherBytes(Message(4, r), &got[r]); }));
    for (int r = 0; r < world; ++r)
      for (int q = 0; q < world; ++q) REQUIRE(got[r][q] == Message(4, q));
  }
  std::vector<std::vector<uint8_t>> alone;
  auto one = LocalRing::Create(1);
  REQUIRE(one.ok());
  Status st = (*one)->rank(0).AllGatherBytes(std::vector<uint8_t>(9), &alone, 8);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("9 bytes") != std::string::npos);
}

}  // namespace
}  // namespace pstrain
