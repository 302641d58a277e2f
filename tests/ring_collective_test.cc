// The CPU ring collectives over real sockets on 127.0.0.1: exact sums for
// world sizes 1 to 5 and sizes that do not divide into chunks (including
// fewer elements than ranks, and chunks of several segments); averages;
// broadcast from every root; barriers; many operations back to back; a rank
// that goes away makes the others fail with an error naming it instead of
// hanging; a segment read straight into the tensor is stopped when the
// operation fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "comm/collective/local_ring.h"
#include "comm/collective/tensor_buckets.h"
#include "comm/transport/listener.h"
#include "src/common/logging.h"
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

// Rank 1 of 2 on a loop of its own, both neighbours' ends on that loop too:
// the test plays rank 0 through the ring's loop-thread entry points.
TEST_CASE("a failure while a segment is read into the tensor closes its connection") {
  Logger log = MakeLogger("ring");
  log->set_level(spdlog::level::warn);
  EventLoop loop;
  REQUIRE(loop.Start().ok());
  Listener listener(&loop, log);
  Completion<Connection::Ptr> accepted;
  auto port = loop.Call<StatusOr<uint16_t>>(
      [&] {
        return listener.Listen("127.0.0.1", 0, [accepted](Connection::Ptr c) {
          c->Start([](const Connection::Ptr&, Incoming&&) {}, nullptr);
          accepted.Set(c);
        });
      },
      Aborted("stopping"));
  REQUIRE(port.ok());
  Completion<StatusOr<Connection::Ptr>> connected;
  loop.Post([&, connected] {
    Connection::Connect(&loop, log, "127.0.0.1", *port,
                        [connected](StatusOr<Connection::Ptr> c) { connected.Set(c); });
  });
  auto out = connected.Wait();
  REQUIRE(out.ok());
  Connection::Ptr in = accepted.Wait();  // stands for the connection from rank 0
  loop.Post([c = *out] { c->Start(nullptr, nullptr); });
  RingCollective ring(&loop, 1, 2, *out);

  const int64_t n = 1000;  // chunk 0: [0, 500), chunk 1: [500, 1000), one segment each
  std::vector<float> data(n, 1.0f);
  Status result;
  std::thread caller([&] { result = ring.AllReduce(data.data(), n, ReduceOp::kSum); });
  const uint64_t bytes = 500 * sizeof(float);
  // All-gather (step 1) brings chunk 1 to rank 1: into the tensor, once the
  // operation has begun.
  Buffer placed;
  for (int tries = 0; tries < 5000 && placed.data == nullptr; ++tries) {
    placed = loop.Call<Buffer>(
        [&] {
          return ring.PlaceChunk(in, RingChunk{1, 1, 0}, bytes);
        },
        Buffer{});
    if (placed.data != reinterpret_cast<uint8_t*>(data.data() + 500)) {
      placed = Buffer{};
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  const bool into_tensor = placed.data == reinterpret_cast<uint8_t*>(data.data() + 500);
  // A segment to sum (reduce-scatter, step 0) never lands in the tensor.
  Buffer summed = loop.Call<Buffer>(
      [&] {
        return ring.PlaceChunk(in, RingChunk{1, 0, 0}, bytes);
      },
      Buffer{});
  // The next rank is lost while the placed segment is still coming.
  const bool closed = loop.Call<bool>(
      [&] {
        ring.OnPeerLost(Unavailable("ring rank 0 is gone: test"));
        return in->closed();
      },
      false);
  caller.join();
  CHECK(into_tensor);
  CHECK(summed.size == bytes);
  CHECK((summed.data < reinterpret_cast<uint8_t*>(data.data()) ||
         summed.data >= reinterpret_cast<uint8_t*>(data.data() + n)));
  CHECK(closed);
  CHECK_FALSE(result.ok());
  CHECK(result.message().find("ring rank 0 is gone") != std::string::npos);
  REQUIRE(loop.Stop().ok());
}

}  // namespace
}  // namespace pstrain
