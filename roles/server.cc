#include "roles/server.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <thread>

namespace pstrain {
namespace {

int ShardThreads() {
  unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hw / 2, 1u, 4u));
}

}  // namespace

Server::Server(NodeOptions options, Logger log, Config config)
    : config_(std::move(config)), node_(std::move(options), std::move(log)) {
  for (int i = 0; i < ShardThreads(); ++i)
    shards_.push_back(
        std::make_unique<PsShard>(&config_, node_.options().cluster.worker_num, node_.log()));
}

Server::~Server() { (void)node_.loop().Stop(); }

Status Server::Run() {
  auto topology = node_.Start(
      [this](const Connection::Ptr& c, Incoming&& in) { OnPeerRequest(c, std::move(in)); });
  if (!topology.ok()) return topology.status();
  PSTRAIN_RETURN_IF_ERROR(node_.cluster().Barrier(BarrierGroup::kAll));
  return node_.Finish();
}

PsShard& Server::ShardFor(const std::string& tensor, uint32_t part) {
  size_t h = std::hash<std::string>()(tensor) * 31 + part;
  return *shards_[h % shards_.size()];
}

// Replies are made on shard threads and sent from the loop thread.
PsShard::Reply Server::ReplyTo(const Connection::Ptr& conn, uint64_t request_id) {
  EventLoop* loop = &node_.loop();
  return [loop, conn, request_id](MessageBody body, Payload payload) {
    loop->Post([conn, request_id, body = std::move(body), payload = std::move(payload)]() mutable {
      conn->Reply(request_id, std::move(body), std::move(payload));
    });
  };
}

void Server::OnPeerRequest(const Connection::Ptr& conn, Incoming&& in) {
  const uint64_t id = in.message.request_id;
  if (auto* push = std::get_if<PushRequest>(&in.message.body)) {
    ShardFor(push->tensor, push->part)
        .Push(std::move(*push), std::move(in.payload), ReplyTo(conn, id));
  } else if (auto* pull = std::get_if<PullRequest>(&in.message.body)) {
    ShardFor(pull->tensor, pull->part).Pull(std::move(*pull), ReplyTo(conn, id));
  } else if (auto* hello = std::get_if<Hello>(&in.message.body)) {
    node_.log()->info("{} rank {} connected from {}", RoleName(hello->node.role), hello->node.rank,
                      conn->peer());
    conn->Reply(id, Ack{});
  } else {
    conn->Reply(
        id, ErrorReply{fmt::format("a server does not handle {}", MessageName(in.message.body))});
  }
}

}  // namespace pstrain
