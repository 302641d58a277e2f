// The CPU ring all-reduce over real sockets on 127.0.0.1: exact sums for
// world sizes 1 to 5 and sizes that do not divide into chunks (including
// fewer elements than ranks, and chunks of several segments); a rank that goes away makes the
// others fail with an error naming it instead of hanging.
#include <doctest/doctest.h>

#include <memory>
#include <thread>
#include <vector>

#include "comm/local_ring.h"

namespace pstrain {
namespace {

std::unique_ptr<LocalRing> MakeRing(int world) {
  auto ring = LocalRing::Create(world);
  REQUIRE_MESSAGE(ring.ok(), ring.status().message());
  return std::move(*ring);
}

float Value(int rank, int64_t i) { return static_cast<float>((rank + 1) * 1000 + i % 97); }

TEST_CASE("ring all-reduce gives the exact sum for uneven sizes and world sizes 1 to 5") {
  for (int world = 1; world <= 5; ++world) {
    auto ring = MakeRing(world);
    for (int64_t n :
         {int64_t{1}, int64_t{3}, int64_t{7}, int64_t{1000}, int64_t{100003}, int64_t{1000003}}) {
      CAPTURE(world);
      CAPTURE(n);
      std::vector<std::vector<float>> data(world, std::vector<float>(n));
      for (int r = 0; r < world; ++r)
        for (int64_t i = 0; i < n; ++i) data[r][i] = Value(r, i);
      std::vector<Status> results(world);
      std::vector<std::thread> threads;
      for (int r = 0; r < world; ++r)
        threads.emplace_back([&, r] { results[r] = ring->rank(r).AllReduce(data[r].data(), n); });
      for (auto& t : threads) t.join();
      for (int r = 0; r < world; ++r) {
        REQUIRE_MESSAGE(results[r].ok(), results[r].message());
        for (int64_t i = 0; i < n; ++i) {
          float sum = 0;
          for (int q = 0; q < world; ++q) sum += Value(q, i);
          REQUIRE(data[r][i] == sum);
        }
      }
    }
  }
}

TEST_CASE("a rank that goes away mid-collective fails the others, naming it") {
  auto ring = MakeRing(3);
  std::vector<float> a(1000, 1.0f), b(1000, 2.0f);
  Status sa, sb;
  std::thread ta([&] { sa = ring->rank(0).AllReduce(a.data(), 1000); });
  std::thread tb([&] { sb = ring->rank(1).AllReduce(b.data(), 1000); });
  (void)ring->loop(2).Stop();  // rank 2 dies without taking part
  ta.join();
  tb.join();
  REQUIRE_FALSE(sa.ok());
  REQUIRE_FALSE(sb.ok());
  CHECK(sa.message().find("ring rank 2 is gone") != std::string::npos);
  CHECK(sb.message().find("ring rank 2 is gone") != std::string::npos);
}

}  // namespace
}  // namespace pstrain
