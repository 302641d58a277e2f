// The shared-memory ring collectives: exact sums for world sizes 1 to 5 and
// sizes that do not divide into chunks, results bit-identical to the TCP
// ring's, averages, broadcast from every root, barriers, operations back to
// back, ranks as separate processes; a lost neighbour fails every waiting
// call with the reason; a wrong nonce, a bogus name or a hostile segment is
// refused; no shared-memory name outlives its ring.
#include "comm/collective/shm_ring.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/collective/local_ring.h"
#include "tests/rank_threads.h"

namespace pstrain {
namespace {

using Rings = std::vector<std::unique_ptr<ShmRingCollective>>;

// Small slots by default, so that chunks span many segments and the slots
// fill up.
Rings MakeRings(int world, ShmChannel::Geometry geometry = {2, 4096}) {
  Rings rings;
  for (int r = 0; r < world; ++r) {
    auto ring = ShmRingCollective::Create(r, world, geometry);
    REQUIRE_MESSAGE(ring.ok(), ring.status().message());
    rings.push_back(std::move(*ring));
  }
  for (int r = 0; r < world; ++r) {
    const auto& next = rings[(r + 1) % world];
    Status st = rings[r]->ConnectNext(next->inbound_name(), next->inbound_nonce());
    REQUIRE_MESSAGE(st.ok(), st.message());
    next->InboundOpened();
  }
  return rings;
}

bool NameExists(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

using testing::OnEveryRank;
using testing::RequireAllOk;

float Whole(int rank, int64_t i) { return static_cast<float>((rank + 1) * 1000 + i % 97); }
// Values whose sum depends on the order of additions.
float Fraction(int rank, int64_t i) {
  return static_cast<float>((rank * 7919 + i * 104729) % 100003) / 997.0f + 1e-3f * rank;
}

std::vector<std::vector<float>> Inputs(int world, int64_t n, float (*value)(int, int64_t)) {
  std::vector<std::vector<float>> data(world, std::vector<float>(n));
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < n; ++i) data[r][i] = value(r, i);
  return data;
}

const int64_t kSizes[] = {1, 3, 7, 1000, 100003, 1000003};

TEST_CASE("shm all-reduce gives the exact sum for uneven sizes and world sizes 1 to 5") {
  for (int world = 1; world <= 5; ++world) {
    Rings rings = MakeRings(world);
    for (int64_t n : kSizes) {
      CAPTURE(world);
      CAPTURE(n);
      auto data = Inputs(world, n, Whole);
      RequireAllOk(OnEveryRank(
          world, [&](int r) { return rings[r]->AllReduce(data[r].data(), n, ReduceOp::kSum); }));
      for (int r = 0; r < world; ++r)
        for (int64_t i = 0; i < n; ++i) {
          float sum = 0;
          for (int q = 0; q < world; ++q) sum += Whole(q, i);
          REQUIRE(data[r][i] == sum);
        }
    }
  }
}

TEST_CASE("shm all-reduce is bit-identical to the TCP ring") {
  for (int world = 2; world <= 5; ++world) {
    auto tcp = LocalRing::Create(world);
    REQUIRE(tcp.ok());
    Rings rings = MakeRings(world, {4, 64 * 1024});
    for (int64_t n : kSizes) {
      CAPTURE(world);
      CAPTURE(n);
      auto expected = Inputs(world, n, Fraction), got = expected;
      RequireAllOk(OnEveryRank(world, [&](int r) {
        return (*tcp)->rank(r).AllReduce(expected[r].data(), n, ReduceOp::kSum);
      }));
      RequireAllOk(OnEveryRank(
          world, [&](int r) { return rings[r]->AllReduce(got[r].data(), n, ReduceOp::kSum); }));
      for (int r = 0; r < world; ++r)
        REQUIRE(std::memcmp(got[r].data(), expected[r].data(), n * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("shm all-reduce averages") {
  const int world = 4;
  Rings rings = MakeRings(world);
  const int64_t n = 300001;
  std::vector<std::vector<float>> data(world, std::vector<float>(n));
  for (int r = 0; r < world; ++r) std::fill(data[r].begin(), data[r].end(), r * 2.0f);  // mean 3
  RequireAllOk(OnEveryRank(
      world, [&](int r) { return rings[r]->AllReduce(data[r].data(), n, ReduceOp::kAverage); }));
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < n; ++i) REQUIRE(data[r][i] == 3.0f);
}

TEST_CASE("shm broadcast copies the root's tensor to every rank, from any root") {
  for (int world = 1; world <= 5; ++world) {
    Rings rings = MakeRings(world);
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{131073}, int64_t{400000}}) {
      for (int root = 0; root < world; ++root) {
        CAPTURE(world);
        CAPTURE(n);
        CAPTURE(root);
        auto data = Inputs(world, n, Whole);
        RequireAllOk(OnEveryRank(
            world, [&](int r) { return rings[r]->Broadcast(data[r].data(), n, root); }));
        for (int r = 0; r < world; ++r)
          for (int64_t i = 0; i < n; ++i) REQUIRE(data[r][i] == Whole(root, i));
      }
    }
    float x = 0;
    CHECK_FALSE(rings[0]->Broadcast(&x, 1, world).ok());
  }
}

TEST_CASE("shm barrier: no rank leaves before every rank has come") {
  const int world = 3;
  Rings rings = MakeRings(world);
  std::atomic<int> arrived{0};
  std::vector<int> seen(world, -1);
  RequireAllOk(OnEveryRank(world, [&](int r) {
    // Rank 2 comes late (the delay only makes the check meaningful).
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ++arrived;
    Status st = rings[r]->Barrier();
    seen[r] = arrived.load();
    return st;
  }));
  for (int r = 0; r < world; ++r) CHECK(seen[r] == world);
}

// Many small and large operations of each kind, in the same order on every
// rank; returns an error naming the first wrong value.
Status MixedOps(ShmRingCollective& ring, int rounds) {
  const int world = ring.world(), r = ring.rank();
  std::vector<float> d(70001);
  for (int round = 0; round < rounds; ++round) {
    const int64_t n = round % 2 ? 1000 : 70001;
    std::fill(d.begin(), d.begin() + n, static_cast<float>(r + round));
    PSTRAIN_RETURN_IF_ERROR(ring.Broadcast(d.data(), n, round % world));
    if (d[n - 1] != static_cast<float>(round % world + round))
      return Internal("broadcast delivered the wrong values");
    PSTRAIN_RETURN_IF_ERROR(ring.AllReduce(d.data(), n, ReduceOp::kSum));
    if (d[0] != static_cast<float>(world * (round % world + round)) || d[n - 1] != d[0])
      return Internal("all-reduce after broadcast gave the wrong sum");
    PSTRAIN_RETURN_IF_ERROR(ring.Barrier());
  }
  return Status::OK();
}

TEST_CASE("mixed shm operations back to back stay in step") {
  for (int world : {2, 3, 4}) {
    Rings rings = MakeRings(world);
    RequireAllOk(OnEveryRank(world, [&](int r) { return MixedOps(*rings[r], 40); }));
  }
}

TEST_CASE("ranks as separate processes") {
  const int world = 3;
  const int64_t n = 1000003;
  auto inputs = Inputs(world, n, Fraction), expected = inputs;
  {
    // The reference, whose threads are gone before the fork.
    auto tcp = LocalRing::Create(world);
    REQUIRE(tcp.ok());
    RequireAllOk(OnEveryRank(world, [&](int r) {
      return (*tcp)->rank(r).AllReduce(expected[r].data(), n, ReduceOp::kSum);
    }));
  }
  Rings rings = MakeRings(world, {4, 256 * 1024});
  std::vector<pid_t> children;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      alarm(60);  // a hung child dies, and its parent sees why
      ShmRingCollective& ring = *rings[r];
      if (!ring.AllReduce(inputs[r].data(), n, ReduceOp::kSum).ok()) _exit(2);
      if (std::memcmp(inputs[r].data(), expected[r].data(), n * sizeof(float)) != 0) _exit(3);
      if (!MixedOps(ring, 20).ok()) _exit(4);
      _exit(0);  // no destructors: the parent owns the rings
    }
    children.push_back(pid);
  }
  for (int r = 0; r < world; ++r) {
    int status = 0;
    REQUIRE(waitpid(children[r], &status, 0) == children[r]);
    CAPTURE(r);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

TEST_CASE("a lost neighbour fails every waiting call, and later ones, naming it") {
  Rings rings = MakeRings(3);
  std::vector<float> a(100000, 1.0f), b(100000, 2.0f);
  const auto start = std::chrono::steady_clock::now();
  Status sa, sb;
  // Rank 2 never takes part: ranks 0 and 1 wait until told it is gone.
  std::thread ta([&] { sa = rings[0]->AllReduce(a.data(), 100000, ReduceOp::kSum); });
  std::thread tb([&] { sb = rings[1]->AllReduce(b.data(), 100000, ReduceOp::kSum); });
  rings[0]->SetLost(Unavailable("ring rank 2 is gone"));
  rings[1]->SetLost(Unavailable("ring rank 2 is gone"));
  ta.join();
  tb.join();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  REQUIRE_FALSE(sa.ok());
  REQUIRE_FALSE(sb.ok());
  CHECK(sa.message() == "ring rank 2 is gone");
  CHECK(sb.message() == "ring rank 2 is gone");
  Status later = rings[0]->Barrier();
  CHECK(later.message() == "ring rank 2 is gone");
}

TEST_CASE("a neighbour that closes its ring fails the waiting call") {
  Rings rings = MakeRings(2);
  std::vector<float> a(1000, 1.0f);
  Status sa;
  std::thread ta([&] { sa = rings[0]->AllReduce(a.data(), 1000, ReduceOp::kSum); });
  rings[1].reset();
  ta.join();
  REQUIRE_FALSE(sa.ok());
  CHECK(sa.message().find("shm ring rank 0") != std::string::npos);
  CHECK(sa.message().find("closed it") != std::string::npos);
}

TEST_CASE("a wrong nonce or a bogus name is refused") {
  Rings rings;
  for (int r = 0; r < 2; ++r) rings.push_back(ShmRingCollective::Create(r, 2).value());
  const std::string name = rings[1]->inbound_name();
  Status wrong = rings[0]->ConnectNext(name, rings[1]->inbound_nonce() + 1);
  CHECK(wrong.message().find("another nonce") != std::string::npos);
  CHECK_FALSE(rings[0]->ConnectNext("/pstrain-" + std::string(32, '0'), 1).ok());
  CHECK(rings[0]->ConnectNext("/../etc/passwd", 1).code() == StatusCode::kInvalidArgument);
  CHECK(rings[0]->ConnectNext("/pstrain-zz", 1).code() == StatusCode::kInvalidArgument);
  // Not connected: a call says so instead of hanging.
  CHECK(rings[0]->Barrier().code() == StatusCode::kFailedPrecondition);
  REQUIRE(rings[0]->ConnectNext(name, rings[1]->inbound_nonce()).ok());
}

TEST_CASE("a segment that does not fit fails the call, not the process") {
  auto ring = ShmRingCollective::Create(0, 2);
  REQUIRE(ring.ok());
  // Rank 1 played by hand: its inbound channel, and a sender into rank 0's.
  auto inbound1 = ShmChannel::Create(ShmChannel::Geometry());
  REQUIRE(inbound1.ok());
  REQUIRE((*ring)->ConnectNext((*inbound1)->name(), (*inbound1)->nonce()).ok());
  auto to0 = ShmChannel::Open((*ring)->inbound_name(), (*ring)->inbound_nonce());
  REQUIRE(to0.ok());
  auto slot = (*to0)->FreeSlot();
  REQUIRE(slot.ok());
  (*to0)->Publish(SegmentHeader{1, 1, 5, 10, 0, 20});  // step 5 of a ring of 2
  std::vector<float> data(10, 1.0f);
  Status st = (*ring)->AllReduce(data.data(), 10, ReduceOp::kSum);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("step 5") != std::string::npos);
  CHECK_FALSE((*ring)->Barrier().ok());  // the stream is out of step for good
}

TEST_CASE("no shared-memory name outlives its ring") {
  std::vector<std::string> names;
  {
    Rings rings = MakeRings(3);
    for (auto& r : rings) names.push_back(r->inbound_name());
    for (const std::string& name : names) CHECK_FALSE(NameExists(name));  // unlinked once opened
  }
  {
    auto lone = ShmRingCollective::Create(0, 2);  // never opened by a peer
    REQUIRE(lone.ok());
    names.push_back((*lone)->inbound_name());
    CHECK(NameExists(names.back()));
  }
  for (const std::string& name : names) CHECK_FALSE(NameExists(name));
}

}  // namespace
}  // namespace pstrain
