#include "comm/collective/local_ring.h"

#include <fmt/format.h>

#include "src/common/logging.h"

namespace pstrain {

StatusOr<std::unique_ptr<LocalRing>> LocalRing::Create(int world) {
  if (world < 1) return InvalidArgument(fmt::format("a ring of {} ranks", world));
  std::unique_ptr<LocalRing> ring(new LocalRing(world));
  PSTRAIN_RETURN_IF_ERROR(ring->Wire());
  return ring;
}

LocalRing::~LocalRing() {
  for (size_t r = 0; r < loops_.size(); ++r) {
    if (!loops_[r]) continue;
    const Status stopped = loops_[r]->Stop();
    if (!stopped.ok()) MakeLogger("ring")->error("stopping rank {}: {}", r, stopped.message());
  }
}

Status LocalRing::Wire() {
  const int world = static_cast<int>(rings_.size());
  Logger log = MakeLogger("ring");
  log->set_level(spdlog::level::warn);
  std::vector<uint16_t> ports(world);
  for (int r = 0; r < world; ++r) {
    loops_[r] = std::make_unique<EventLoop>();
    PSTRAIN_RETURN_IF_ERROR(loops_[r]->Start());
    listeners_.push_back(std::make_unique<Listener>(loops_[r].get(), log));
    const int prev = (r + world - 1) % world;
    auto port = loops_[r]->Call<StatusOr<uint16_t>>(
        [this, r, prev] {
          return listeners_[r]->Listen("127.0.0.1", 0, [this, r, prev](Connection::Ptr c) {
            c->SetRequestPlacer(
                [this, r](const Connection::Ptr& from, const Message& m, uint64_t size) {
                  auto* chunk = std::get_if<RingChunk>(&m.body);
                  if (chunk == nullptr || !rings_[r]) return Buffer{};
                  return rings_[r]->PlaceChunk(from, *chunk, size);
                });
            c->Start(
                [this, r](const Connection::Ptr&, Incoming&& in) {
                  if (auto* chunk = std::get_if<RingChunk>(&in.message.body))
                    rings_[r]->OnChunk(*chunk, std::move(in.payload));
                },
                [this, r, prev](const Connection::Ptr&, const Status& why) {
                  if (rings_[r])
                    rings_[r]->OnPeerLost(
                        Unavailable(fmt::format("ring rank {} is gone: {}", prev, why.message())));
                });
          });
        },
        Aborted("the ring is stopping"));
    if (!port.ok()) return port.status();
    ports[r] = *port;
  }
  if (world == 1) {
    rings_[0] = std::make_unique<RingCollective>(loops_[0].get(), 0, 1, nullptr);
    return Status::OK();
  }
  for (int r = 0; r < world; ++r) {
    const int next = (r + 1) % world;
    Completion<StatusOr<Connection::Ptr>> connected;
    EventLoop* loop = loops_[r].get();
    loop->Post([loop, log, port = ports[next], connected] {
      Connection::Connect(loop, log, "127.0.0.1", port,
                          [connected](StatusOr<Connection::Ptr> c) { connected.Set(c); });
    });
    auto conn = connected.Wait();
    if (!conn.ok()) return conn.status().WithContext(fmt::format("ring rank {}", r));
    rings_[r] = std::make_unique<RingCollective>(loop, r, world, *conn);
    RingCollective* ring = rings_[r].get();
    loop->Post([c = *conn, ring, next] {
      c->Start(nullptr, [ring, next](const Connection::Ptr&, const Status& why) {
        ring->OnPeerLost(Unavailable(fmt::format("ring rank {} is gone: {}", next, why.message())));
      });
    });
  }
  return Status::OK();
}

}  // namespace pstrain
