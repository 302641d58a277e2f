#include "roles/server.h"

#include <fmt/format.h>

namespace pstrain {

Server::Server(NodeOptions options, Logger log) : node_(std::move(options), std::move(log)) {}

Status Server::Run() {
  auto topology = node_.Start(
      [this](const Connection::Ptr& c, Incoming&& in) { OnPeerRequest(c, std::move(in)); });
  if (!topology.ok()) return topology.status();
  PSTRAIN_RETURN_IF_ERROR(node_.cluster().Barrier(BarrierGroup::kAll));
  return node_.Finish();
}

void Server::OnPeerRequest(const Connection::Ptr& conn, Incoming&& in) {
  if (auto* hello = std::get_if<Hello>(&in.message.body)) {
    node_.log()->info("{} rank {} connected from {}", RoleName(hello->node.role), hello->node.rank,
                      conn->peer());
    conn->Reply(in.message.request_id, Ack{});
    return;
  }
  conn->Reply(in.message.request_id,
              ErrorReply{fmt::format("a server does not handle {}", MessageName(in.message.body))});
}

}  // namespace pstrain
