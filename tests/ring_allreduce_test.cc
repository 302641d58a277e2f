// The CPU ring all-reduce over real sockets on 127.0.0.1: exact sums for
// world sizes 1 to 5 and sizes that do not divide into chunks (including
// fewer elements than ranks); a rank that goes away makes the others fail
// with an error naming it instead of hanging.
#include "comm/ring_allreduce.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <memory>
#include <thread>
#include <vector>

#include "comm/listener.h"
#include "src/common/logging.h"

namespace pstrain {
namespace {

// n ranks, each with its own loop; rank r connects to rank r+1.
class Ring {
 public:
  explicit Ring(int world) : loops_(world), rings_(world) {
    Logger log = MakeLogger("ring");
    log->set_level(spdlog::level::warn);
    std::vector<uint16_t> ports(world);
    for (int r = 0; r < world; ++r) {
      loops_[r] = std::make_unique<EventLoop>();
      REQUIRE(loops_[r]->Start().ok());
      listeners_.push_back(std::make_unique<Listener>(loops_[r].get(), log));
      auto port = loops_[r]->Call<StatusOr<uint16_t>>(
          [&, r] {
            return listeners_[r]->Listen("127.0.0.1", 0, [this, r, world](Connection::Ptr c) {
              int prev = (r + world - 1) % world;
              c->Start(
                  [this, r](const Connection::Ptr&, Incoming&& in) {
                    if (auto* chunk = std::get_if<RingChunk>(&in.message.body))
                      rings_[r]->OnChunk(*chunk, std::move(in.payload));
                  },
                  [this, r, prev](const Connection::Ptr&, const Status& why) {
                    if (rings_[r])
                      rings_[r]->OnPeerLost(Unavailable(
                          fmt::format("ring rank {} is gone: {}", prev, why.message())));
                  });
            });
          },
          Aborted("stopped"));
      REQUIRE(port.ok());
      ports[r] = *port;
    }
    for (int r = 0; r < world && world > 1; ++r) {
      int next = (r + 1) % world;
      Completion<StatusOr<Connection::Ptr>> connected;
      loops_[r]->Post([&, r, next] {
        Connection::Connect(loops_[r].get(), log, "127.0.0.1", ports[next],
                            [connected](StatusOr<Connection::Ptr> c) { connected.Set(c); });
      });
      auto conn = connected.Wait();
      REQUIRE(conn.ok());
      rings_[r] = std::make_unique<RingAllReduce>(loops_[r].get(), r, world, *conn);
      Connection::Ptr c = *conn;
      RingAllReduce* ring = rings_[r].get();
      loops_[r]->Post([c, ring, next] {
        c->Start(nullptr, [ring, next](const Connection::Ptr&, const Status& why) {
          ring->OnPeerLost(
              Unavailable(fmt::format("ring rank {} is gone: {}", next, why.message())));
        });
      });
    }
    if (world == 1) rings_[0] = std::make_unique<RingAllReduce>(loops_[0].get(), 0, 1, nullptr);
  }
  ~Ring() {
    for (auto& l : loops_) (void)l->Stop();
  }
  RingAllReduce& rank(int r) { return *rings_[r]; }
  EventLoop& loop(int r) { return *loops_[r]; }

 private:
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::vector<std::unique_ptr<RingAllReduce>> rings_;
};

float Value(int rank, int64_t i) { return static_cast<float>((rank + 1) * 1000 + i % 97); }

TEST_CASE("ring all-reduce gives the exact sum for uneven sizes and world sizes 1 to 5") {
  for (int world = 1; world <= 5; ++world) {
    Ring ring(world);
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{7}, int64_t{1000}, int64_t{100003}}) {
      CAPTURE(world);
      CAPTURE(n);
      std::vector<std::vector<float>> data(world, std::vector<float>(n));
      for (int r = 0; r < world; ++r)
        for (int64_t i = 0; i < n; ++i) data[r][i] = Value(r, i);
      std::vector<Status> results(world);
      std::vector<std::thread> threads;
      for (int r = 0; r < world; ++r)
        threads.emplace_back([&, r] { results[r] = ring.rank(r).AllReduce(data[r].data(), n); });
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
  Ring ring(3);
  std::vector<float> a(1000, 1.0f), b(1000, 2.0f);
  Status sa, sb;
  std::thread ta([&] { sa = ring.rank(0).AllReduce(a.data(), 1000); });
  std::thread tb([&] { sb = ring.rank(1).AllReduce(b.data(), 1000); });
  (void)ring.loop(2).Stop();  // rank 2 dies without taking part
  ta.join();
  tb.join();
  REQUIRE_FALSE(sa.ok());
  REQUIRE_FALSE(sb.ok());
  CHECK(sa.message().find("ring rank 2 is gone") != std::string::npos);
  CHECK(sb.message().find("ring rank 2 is gone") != std::string::npos);
}

}  // namespace
}  // namespace pstrain
