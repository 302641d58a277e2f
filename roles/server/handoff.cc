// Server step 7 (roles/server/server.h): moving a partition to another
// server while the job runs, as roles/server/handoff.h lays out.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "roles/server/handoff_codec.h"
#include "roles/server/server.h"

namespace pstrain {

std::string Server::ChiefOnly(const Connection::Ptr& conn, const char* what) const {
  auto it = worker_of_.find(conn.get());
  return it == worker_of_.end() || it->second != ChiefRank()
             ? fmt::format("only the chief worker (rank {}) {}", ChiefRank(), what)
             : "";
}

void Server::OnHandOff(const Connection::Ptr& conn, uint64_t id, const HandOffRequest& request) {
  const int servers =
      std::max(node_.cluster().server_num(), node_.options().cluster.elastic.max_servers);
  std::string why = ChiefOnly(conn, "moves partitions");
  if (why.empty() && request.to_rank >= servers)
    why =
        fmt::format("server {} is not in this job of at most {} servers", request.to_rank, servers);
  if (why.empty() && request.to_rank == rank()) why = "it is already on this server";
  if (why.empty()) {
    if (const Moved* moved = moved_.Find(request.tensor, request.part))
      why = fmt::format("it was handed off to server {} in placement {}", moved->rank,
                        moved->version);
  }
  PsShard* shard = why.empty() ? RouteOf(request.tensor, request.part) : nullptr;
  if (why.empty() && shard == nullptr) why = "it is not on this server";
  if (!why.empty()) {
    why = fmt::format("hand-off of '{}' partition {} to server {}: {}", request.tensor,
                      request.part, request.to_rank, why);
    node_.log()->warn("refused a {}", why);
    return conn->Reply(id, ErrorReply{why});
  }
  // From here on its pushes and pulls are answered Moved; those already
  // passed to the shard are applied before the hand-off, which runs after
  // them on the shard's thread.
  moved_.Record(request.tensor, request.part, Moved{request.to_rank, request.version});
  EventLoop* loop = &node_.loop();
  shard->HandOff(request.tensor, request.part,
                 [this, loop, conn, id, request](StatusOr<MovedPartition> state) {
                   if (!state.ok()) {
                     loop->Post([this, conn, id, request, st = state.status()] {
                       moved_.Forget(request.tensor, request.part);  // it stays here
                       conn->Reply(id, ErrorReply{st.message()});
                     });
                     return;
                   }
                   auto bytes =
                       std::make_shared<std::vector<uint8_t>>(EncodePartitionState(*state));
                   node_.log()->info(
                       "handed off '{}' partition {} ({} bytes, step {}) to server {} "
                       "(placement {})",
                       request.tensor, request.part, bytes->size(), state->partition.clock,
                       request.to_rank, request.version);
                   ReplyTo(conn, id)(HandOffReply{request.version},
                                     Payload{bytes->data(), bytes->size(), bytes});
                 });
}

void Server::OnTakeOver(const Connection::Ptr& conn, uint64_t id, const TakeOverRequest& request,
                        const Buffer& payload) {
  const int64_t largest = config_.train.partition_bytes / static_cast<int64_t>(sizeof(float));
  std::string why = ChiefOnly(conn, "moves partitions");
  if (why.empty() && request.elements > largest)
    why = fmt::format("{} values; partitions hold at most {} (train.partition_bytes)",
                      request.elements, largest);
  if (why.empty() && request.expect && payload.size > 0) why = "an expect with a state";
  PsShard* shard = nullptr;
  if (why.empty()) {
    shard = ShardFor(request.tensor, request.part, request.elements * 4);
    if (shard == nullptr) why = "this server holds the most partitions it takes";
  }
  if (!why.empty()) {
    why = fmt::format("take-over of '{}' partition {}: {}", request.tensor, request.part, why);
    node_.log()->warn("refused a {}", why);
    return conn->Reply(id, ErrorReply{why});
  }
  moved_.Forget(request.tensor, request.part);  // it comes (back) here
  if (request.expect) {
    shard->Expect(request.tensor, request.part);
    return conn->Reply(id, Ack{});
  }
  if (payload.size == 0) {
    shard->CallOff(request.tensor, request.part,
                   fmt::format("the move of '{}' partition {} to this server was called off",
                               request.tensor, request.part));
    return conn->Reply(id, Ack{});
  }
  auto state = DecodePartitionState(payload.data, payload.size, request.tensor, request.part,
                                    request.elements);
  if (!state.ok()) {
    node_.log()->warn("refused a take-over: {}", state.status().message());
    return conn->Reply(id, ErrorReply{state.status().message()});
  }
  const int64_t step = state->partition.clock;
  shard->TakeOver(std::move(*state), [this, reply = ReplyTo(conn, id), request, step](Status st) {
    if (!st.ok()) return reply(ErrorReply{st.message()}, {});
    node_.log()->info("took over '{}' partition {} at step {} (placement {})", request.tensor,
                      request.part, step, request.version);
    reply(Ack{}, {});
  });
}

}  // namespace pstrain
