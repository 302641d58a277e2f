#include "comm/transport/message_checks.h"

namespace pstrain::wire_checks {

StatusOr<std::string> Text(const fb::String* s, const char* field, bool required) {
  if (s == nullptr) {
    if (required) return InvalidArgument(fmt::format("missing field {}", field));
    return std::string();
  }
  if (s->size() > kMaxText)
    return InvalidArgument(
        fmt::format("field {} is {} bytes long (limit {})", field, s->size(), kMaxText));
  return s->str();
}

Status ReadRanks(const fb::Vector<int32_t>* ranks, int workers, const char* what,
                 std::vector<int>* out) {
  if (workers < 1 || workers > kMaxElasticNodes || ranks == nullptr || ranks->size() == 0 ||
      ranks->size() > static_cast<fb::uoffset_t>(kMaxElasticNodes))
    return InvalidArgument(fmt::format("{} to {} workers with {} ranks", what, workers,
                                       ranks == nullptr ? 0 : ranks->size()));
  std::vector<bool> taken(static_cast<size_t>(workers), false);
  bool stays = false;
  for (int rank : *ranks) {
    if (rank < -1 || rank >= workers || (rank >= 0 && taken[static_cast<size_t>(rank)]))
      return InvalidArgument(fmt::format("{} to {} workers names rank {} (twice, or out of range)",
                                         what, workers, rank));
    if (rank >= 0) taken[static_cast<size_t>(rank)] = stays = true;
  }
  if (!stays) return InvalidArgument(fmt::format("{} keeps no worker", what));
  out->assign(ranks->begin(), ranks->end());
  return Status::OK();
}

Status ReadSlots(const fb::Vector<int32_t>* slots, int servers, const char* what,
                 std::vector<int>* out) {
  if (slots == nullptr || slots->size() == 0) return Status::OK();
  if (slots->size() != static_cast<fb::uoffset_t>(servers))
    return InvalidArgument(
        fmt::format("{} with {} slots for {} servers", what, slots->size(), servers));
  std::set<int> seen;
  for (int from : *slots) {
    if (from < 0 || from >= kMaxElasticNodes || !seen.insert(from).second)
      return InvalidArgument(fmt::format("{} with slot {} (twice, or out of range)", what, from));
    out->push_back(from);
  }
  return Status::OK();
}

bool KnownPhase(int phase) {
  return phase >= static_cast<int>(RowsPhase::kWhole) &&
         phase <= static_cast<int>(RowsPhase::kDelta);
}

StatusOr<Role> FromWire(w::Role r) {
  switch (r) {
    case w::Role_Scheduler:
      return Role::kScheduler;
    case w::Role_Server:
      return Role::kServer;
    case w::Role_Worker:
      return Role::kWorker;
  }
  return InvalidArgument(fmt::format("unknown role {}", static_cast<int>(r)));
}

StatusOr<NodeInfo> FromWire(const w::NodeInfo* n, const char* field) {
  if (n == nullptr) return InvalidArgument(fmt::format("missing field {}", field));
  NodeInfo out;
  auto id = Text(n->node_id(), "node_id", true);
  if (!id.ok()) return id.status();
  if (id->empty()) return InvalidArgument("empty node_id");
  auto host = Text(n->host(), "host", true);
  if (!host.ok()) return host.status();
  auto role = FromWire(n->role());
  if (!role.ok()) return role.status();
  out.node_id = *id;
  out.host = *host;
  out.role = *role;
  out.port = n->port();
  out.rank = n->rank();
  return out;
}

Status CheckNodeList(const fb::Vector<fb::Offset<w::NodeInfo>>& nodes, size_t header_size) {
  if (nodes.size() > kMaxTopologyNodes)
    return InvalidArgument(
        fmt::format("topology of {} nodes (at most {})", nodes.size(), kMaxTopologyNodes));
  size_t text = 0;
  for (const w::NodeInfo* n : nodes) {
    if (n == nullptr) continue;
    text += (n->node_id() ? n->node_id()->size() : 0) + (n->host() ? n->host()->size() : 0);
  }
  if (text > header_size)
    return InvalidArgument(fmt::format(
        "topology of {} nodes names {} bytes of text in a {}-byte header (shared strings)",
        nodes.size(), text, header_size));
  return Status::OK();
}

StatusOr<PushEncoding> PushEncodingOf(w::PushEncoding encoding) {
  switch (encoding) {
    case w::PushEncoding_Dense:
      return PushEncoding::kDense;
    case w::PushEncoding_Threshold:
      return PushEncoding::kThreshold;
    default:
      return InvalidArgument(fmt::format("unknown encoding {}", static_cast<int>(encoding)));
  }
}

}  // namespace pstrain::wire_checks
