// Checks of a decoded message's fields beyond what the FlatBuffers
// Verifier knows (required fields present, text of sane length, enums and
// ranks in range), shared by the decoders of comm/transport/messages.cc.
// Internal to comm/transport: nothing else includes it.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "comm/transport/messages.h"
#include "comm/transport/wire_generated.h"

namespace pstrain::wire_checks {

namespace fb = ::flatbuffers;
namespace w = ::pstrain::wire;

constexpr size_t kMaxText = 4096;  // node ids, hosts, error messages
constexpr double kMaxWaitSeconds = 7 * 24 * 3600.0;
constexpr int kMaxElasticNodes = 65536;  // MS_WORKER_NUM, MS_SERVER_NUM, train.elastic
constexpr int kMaxReplicas = 8;  // train.replication.replicas (ReplicationConfig::kMaxReplicas)
// Every server and every worker (MS_SERVER_NUM, MS_WORKER_NUM: 4096 each).
constexpr size_t kMaxTopologyNodes = 8192;

// Text of at most kMaxText bytes; `required`: missing is an error.
StatusOr<std::string> Text(const fb::String* s, const char* field, bool required);
// A live change's new worker ranks, one per worker today: each -1 (it
// leaves) or a distinct rank below `workers`, at least one worker staying.
Status ReadRanks(const fb::Vector<int32_t>* ranks, int workers, const char* what,
                 std::vector<int>* out);
// Each rank of a new placement of `servers`, from a distinct rank of
// today's (Stop, PreCopyRows); none: ranks stay.
Status ReadSlots(const fb::Vector<int32_t>* slots, int servers, const char* what,
                 std::vector<int>* out);
bool KnownPhase(int phase);
StatusOr<Role> FromWire(w::Role r);
StatusOr<NodeInfo> FromWire(const w::NodeInfo* n, const char* field);
// A FlatBuffer may point many vector entries at one table or string, so a
// small header can stand for far more text than it holds. Honest senders
// never share (CreateString), so what a node list decodes to is at most the
// header's own size.
Status CheckNodeList(const fb::Vector<fb::Offset<w::NodeInfo>>& nodes, size_t header_size);
// A push's or a pull reply's encoding as read from the wire.
StatusOr<PushEncoding> PushEncodingOf(w::PushEncoding encoding);

// A byte field of exactly out->size() bytes (nonces, MACs).
template <size_t N>
Status CopyExact(const fb::Vector<uint8_t>* v, const char* field, std::array<uint8_t, N>* out) {
  if (v == nullptr) return InvalidArgument(fmt::format("missing field {}", field));
  if (v->size() != N)
    return InvalidArgument(
        fmt::format("field {} is {} bytes long, expected {}", field, v->size(), N));
  std::copy(v->begin(), v->end(), out->begin());
  return Status::OK();
}

}  // namespace pstrain::wire_checks
