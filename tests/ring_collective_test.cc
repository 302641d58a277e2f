// The CPU ring collectives over real sockets on 127.0.0.1: exact sums for
// world sizes 1 to 5 and sizes that do not divide into chunks (including
// fewer elements than ranks, and chunks of several segments); averages;
// broadcast from every root; barriers; many operations back to back; a rank
// that goes away makes the others fail with an error naming it instead of
// hanging.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "comm/collective/local_ring.h"
#include "comm/collective/tensor_buckets.h"
#include "tests/rank_threads.h"

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
        threads.emplace_back(
            [&, r] { results[r] = ring->rank(r).AllReduce(data[r].data(), n, ReduceOp::kSum); });
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

using testing::OnEveryRank;
using testing::RequireAllOk;

TEST_CASE("ring all-reduce averages") {
  const int world = 4;
  auto ring = MakeRing(world);
  const int64_t n = 300001;
  std::vector<std::vector<float>> data(world, std::vector<float>(n));
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < n; ++i) data[r][i] = static_cast<float>(r * 2);  // mean 3
  RequireAllOk(OnEveryRank(world, [&](int r) {
    return ring->rank(r).AllReduce(data[r].data(), n, ReduceOp::kAverage);
  }));
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < n; i += 997) REQUIRE(data[r][i] == 3.0f);
}

TEST_CASE("ring broadcast copies the root's tensor to every rank, from any root") {
  for (int world = 1; world <= 5; ++world) {
    auto ring = MakeRing(world);
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{131073}, int64_t{400000}}) {
      for (int root = 0; root < world; ++root) {
        CAPTURE(world);
        CAPTURE(n);
        CAPTURE(root);
        std::vector<std::vector<float>> data(world, std::vector<float>(n));
        for (int r = 0; r < world; ++r)
          for (int64_t i = 0; i < n; ++i) data[r][i] = Value(r, i);
        RequireAllOk(OnEveryRank(
            world, [&](int r) { return ring->rank(r).Broadcast(data[r].data(), n, root); }));
        for (int r = 0; r < world; ++r)
          for (int64_t i = 0; i < n; ++i) REQUIRE(data[r][i] == Value(root, i));
      }
    }
  }
}

TEST_CASE("ring barrier: no rank leaves before every rank has come") {
  const int world = 3;
  auto ring = MakeRing(world);
  std::atomic<int> arrived{0};
  std::vector<int> seen(world, -1);
  RequireAllOk(OnEveryRank(world, [&](int r) {
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ++arrived;
    Status st = ring->rank(r).Barrier();
    seen[r] = arrived.load();
    return st;
  }));
  for (int r = 0; r < world; ++r) CHECK(seen[r] == world);
}

TEST_CASE("mixed operations back to back stay in step") {
  const int world = 3;
  auto ring = MakeRing(world);
  std::vector<std::vector<float>> data(world, std::vector<float>(1000));
  RequireAllOk(OnEveryRank(world, [&](int r) -> Status {
    for (int round = 0; round < 50; ++round) {
      std::vector<float>& d = data[r];
      for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<float>(r + round);
      PSTRAIN_RETURN_IF_ERROR(ring->rank(r).Broadcast(d.data(), 1000, round % world));
      if (d[999] != static_cast<float>(round % world + round))
        return Internal("broadcast delivered the wrong values");
      PSTRAIN_RETURN_IF_ERROR(ring->rank(r).AllReduce(d.data(), 1000, ReduceOp::kSum));
      if (d[0] != static_cast<float>(world * (round % world + round)))
        return Internal("all-reduce after broadcast gave the wrong sum");
      PSTRAIN_RETURN_IF_ERROR(ring->rank(r).Barrier());
    }
    return Status::OK();
  }));
}

TEST_CASE("tensor buckets fuse small tensors and keep large ones in place") {
  const int world = 3;
  auto ring = MakeRing(world);
  // 4 KiB buckets: {10, 20, 500} fuse, 2000 floats is alone, then {7, 3}.
  const std::vector<int64_t> sizes = {10, 20, 500, 2000, 7, 3};
  std::vector<std::vector<std::vector<float>>> tensors(world);
  std::vector<std::unique_ptr<TensorBuckets>> buckets(world);
  for (int r = 0; r < world; ++r) {
    std::vector<TensorView> views;
    for (size_t t = 0; t < sizes.size(); ++t) {
      tensors[r].emplace_back(sizes[t]);
      for (int64_t i = 0; i < sizes[t]; ++i) tensors[r][t][i] = Value(r, i) + static_cast<float>(t);
      views.push_back({tensors[r][t].data(), sizes[t]});
    }
    buckets[r] = std::make_unique<TensorBuckets>(views, 4096);
  }
  CHECK(buckets[0]->buckets() == 3);
  RequireAllOk(OnEveryRank(
      world, [&](int r) { return buckets[r]->AllReduce(ring->rank(r), ReduceOp::kSum); }));
  for (int r = 0; r < world; ++r)
    for (size_t t = 0; t < sizes.size(); ++t)
      for (int64_t i = 0; i < sizes[t]; ++i) {
        float sum = 0;
        for (int q = 0; q < world; ++q) sum += Value(q, i) + static_cast<float>(t);
        REQUIRE(tensors[r][t][i] == sum);
      }
  for (int r = 0; r < world; ++r)
    for (auto& t : tensors[r]) std::fill(t.begin(), t.end(), static_cast<float>(r));
  RequireAllOk(OnEveryRank(world, [&](int r) { return buckets[r]->Broadcast(ring->rank(r), 1); }));
  for (int r = 0; r < world; ++r)
    for (auto& t : tensors[r])
      for (float v : t) REQUIRE(v == 1.0f);
}

TEST_CASE("a rank that goes away mid-collective fails the others, naming it") {
  auto ring = MakeRing(3);
  std::vector<float> a(1000, 1.0f), b(1000, 2.0f);
  Status sa, sb;
  std::thread ta([&] { sa = ring->rank(0).AllReduce(a.data(), 1000, ReduceOp::kSum); });
  std::thread tb([&] { sb = ring->rank(1).AllReduce(b.data(), 1000, ReduceOp::kSum); });
  REQUIRE(ring->loop(2).Stop().ok());  // rank 2 dies without taking part
  ta.join();
  tb.join();
  REQUIRE_FALSE(sa.ok());
  REQUIRE_FALSE(sb.ok());
  CHECK(sa.message().find("ring rank 2 is gone") != std::string::npos);
  CHECK(sb.message().find("ring rank 2 is gone") != std::string::npos);
}

}  // namespace
}  // namespace pstrain
