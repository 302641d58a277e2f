// EncodeHeader (comm/transport/messages.h): each message body as its
// FlatBuffers union member (comm/transport/wire.fbs).
#include <fmt/format.h>

#include "comm/transport/messages.h"
#include "comm/transport/wire_generated.h"

namespace pstrain {
namespace fb = ::flatbuffers;
namespace w = ::pstrain::wire;

namespace {

w::Role ToWire(Role r) {
  switch (r) {
    case Role::kScheduler:
      return w::Role_Scheduler;
    case Role::kServer:
      return w::Role_Server;
    case Role::kWorker:
      return w::Role_Worker;
  }
  return w::Role_Worker;
}

w::BarrierGroup ToWire(BarrierGroup g) {
  switch (g) {
    case BarrierGroup::kAll:
      return w::BarrierGroup_All;
    case BarrierGroup::kServers:
      return w::BarrierGroup_Servers;
    case BarrierGroup::kWorkers:
      return w::BarrierGroup_Workers;
  }
  return w::BarrierGroup_All;
}

fb::Offset<w::NodeInfo> ToWire(fb::FlatBufferBuilder& b, const NodeInfo& n) {
  return w::CreateNodeInfo(b, b.CreateString(n.node_id), ToWire(n.role), b.CreateString(n.host),
                           n.port, n.rank);
}

// Builds the union member for one body type.
struct BodyEncoder {
  fb::FlatBufferBuilder& b;
  using Out = std::pair<w::Body, fb::Offset<void>>;

  Out operator()(const RegisterRequest& m) {
    auto node = ToWire(b, m.node);
    return {w::Body_RegisterRequest,
            w::CreateRegisterRequest(
                b, node, m.server_num, m.worker_num, m.recovery_wait_s, m.rejoin, m.generation,
                b.CreateString(m.config), m.topology_generation, m.topology_digest,
                m.elastic.min_workers, m.elastic.max_workers, m.elastic.min_servers,
                m.elastic.max_servers, m.elastic.finish_lost, m.elastic.live_workers,
                m.elastic.drop_lost, m.replicas)
                .Union()};
  }
  Out operator()(const RegisterReply& m) {
    return {w::Body_RegisterReply, w::CreateRegisterReply(b, m.rank, m.generation, m.live).Union()};
  }
  Out operator()(const Topology& m) {
    std::vector<fb::Offset<w::NodeInfo>> nodes;
    for (const NodeInfo& n : m.nodes) nodes.push_back(ToWire(b, n));
    return {w::Body_Topology, w::CreateTopology(b, b.CreateVector(nodes), m.generation,
                                                m.server_num, m.worker_num, m.base_generation)
                                  .Union()};
  }
  Out operator()(const Heartbeat& m) {
    return {w::Body_Heartbeat,
            w::CreateHeartbeatDirect(b, m.step, m.samples_per_s, m.held_view, m.validation,
                                     m.validation_epoch, m.validation_metric.c_str())
                .Union()};
  }
  Out operator()(const BarrierRequest& m) {
    return {w::Body_BarrierRequest,
            w::CreateBarrierRequest(b, ToWire(m.group), m.value, b.CreateString(m.blob)).Union()};
  }
  Out operator()(const Done&) { return {w::Body_Done, w::CreateDone(b).Union()}; }
  Out operator()(const Shutdown& m) {
    return {w::Body_Shutdown,
            w::CreateShutdown(b, b.CreateString(m.reason), m.failed, m.stopped).Union()};
  }
  Out operator()(const Pause& m) {
    return {w::Body_Pause, w::CreatePause(b, b.CreateString(m.reason), m.generation, m.rank,
                                          m.server_num, m.worker_num)
                               .Union()};
  }
  Out operator()(const NodeFailed& m) {
    return {w::Body_NodeFailed, w::CreateNodeFailed(b, b.CreateString(m.reason), m.recoverable,
                                                    ToWire(m.peer_role), m.peer_rank)
                                    .Union()};
  }
  Out operator()(const StopRequest& m) {
    return {w::Body_StopRequest,
            w::CreateStopRequest(b, b.CreateString(m.reason), m.leave).Union()};
  }
  Out operator()(const ScaleRequest& m) {
    return {w::Body_ScaleRequest, w::CreateScaleRequest(b, m.workers, m.servers).Union()};
  }
  Out operator()(const ScaleReply& m) {
    return {w::Body_ScaleReply, w::CreateScaleReply(b, b.CreateString(m.message)).Union()};
  }
  Out operator()(const Moved& m) {
    return {w::Body_Moved, w::CreateMoved(b, m.rank, m.version).Union()};
  }
  Out operator()(const HandOffRequest& m) {
    return {
        w::Body_HandOffRequest,
        w::CreateHandOffRequest(b, b.CreateString(m.tensor), m.part, m.to_rank, m.version).Union()};
  }
  Out operator()(const ShapeChanged& m) {
    return {w::Body_ShapeChanged,
            w::CreateShapeChanged(b, m.step, m.servers, m.partitions, m.workers).Union()};
  }
  Out operator()(const HandOffReply& m) {
    return {w::Body_HandOffReply, w::CreateHandOffReply(b, m.version).Union()};
  }
  Out operator()(const TakeOverRequest& m) {
    return {w::Body_TakeOverRequest, w::CreateTakeOverRequest(b, b.CreateString(m.tensor), m.part,
                                                              m.version, m.expect, m.elements)
                                         .Union()};
  }
  Out operator()(const RowsHandOffRequest& m) {
    return {w::Body_RowsHandOffRequest,
            w::CreateRowsHandOffRequest(b, m.servers, m.rank, static_cast<int>(m.phase)).Union()};
  }
  Out operator()(const RowsHandOffReply& m) {
    return {w::Body_RowsHandOffReply, w::CreateRowsHandOffReply(b, m.rows, m.step).Union()};
  }
  Out operator()(const RowsTakeOverRequest& m) {
    return {w::Body_RowsTakeOverRequest,
            w::CreateRowsTakeOverRequest(b, m.servers, m.step, m.rank, static_cast<int>(m.phase))
                .Union()};
  }
  Out operator()(const Replicate& m) {
    return {w::Body_Replicate,
            w::CreateReplicate(b, b.CreateString(m.tensor), m.part,
                               static_cast<w::ReplicaKind>(m.kind), m.worker, m.seq, m.origin)
                .Union()};
  }
  Out operator()(const ServerView& m) {
    return {w::Body_ServerView,
            w::CreateServerView(b, m.view, m.lost, b.CreateVector(m.live), b.CreateVector(m.owners))
                .Union()};
  }
  Out operator()(const RowsDigestRequest&) {
    return {w::Body_RowsDigestRequest, w::CreateRowsDigestRequest(b).Union()};
  }
  Out operator()(const RowsDigestReply& m) {
    std::vector<fb::Offset<w::TableDigest>> tables;
    for (size_t t = 0; t < m.tables.size(); ++t)
      tables.push_back(w::CreateTableDigest(b, b.CreateString(m.tables[t]), m.rows[t], m.sums[t]));
    return {w::Body_RowsDigestReply, w::CreateRowsDigestReply(b, b.CreateVector(tables)).Union()};
  }
  Out operator()(const Stop& m) {
    return {w::Body_Stop, w::CreateStop(b, b.CreateString(m.reason), m.at_step, m.servers,
                                        m.slots.empty() ? 0 : b.CreateVector(m.slots),
                                        m.lost.empty() ? 0 : b.CreateVector(m.lost), m.workers,
                                        m.ranks.empty() ? 0 : b.CreateVector(m.ranks), m.lost_from)
                              .Union()};
  }
  Out operator()(const LoseWorker& m) {
    return {w::Body_LoseWorker,
            w::CreateLoseWorker(b, m.rank, m.last_step, b.CreateString(m.reason)).Union()};
  }
  Out operator()(const PreCopyRows& m) {
    return {w::Body_PreCopyRows,
            w::CreatePreCopyRows(b, m.from, m.to, m.slots.empty() ? 0 : b.CreateVector(m.slots))
                .Union()};
  }
  Out operator()(const ChangeWorkers& m) {
    return {w::Body_ChangeWorkers,
            w::CreateChangeWorkers(b, m.step, m.workers, b.CreateVector(m.ranks)).Union()};
  }
  Out operator()(const LoseWorkerReply& m) {
    return {w::Body_LoseWorkerReply, w::CreateLoseWorkerReply(b, m.last_step).Union()};
  }
  Out operator()(const StopReply& m) {
    return {w::Body_StopReply, w::CreateStopReply(b, m.step, m.rest_from).Union()};
  }
  Out operator()(const Hello& m) {
    auto node = ToWire(b, m.node);
    return {w::Body_Hello,
            w::CreateHello(b, node, b.CreateString(m.shm_name), m.shm_nonce, m.generation).Union()};
  }
  Out operator()(const Ack&) { return {w::Body_Ack, w::CreateAck(b).Union()}; }
  Out operator()(const ErrorReply& m) {
    return {w::Body_Error, w::CreateError(b, b.CreateString(m.message)).Union()};
  }
  Out operator()(const PushRequest& m) {
    auto kind = m.kind == PushKind::kInit        ? w::PushKind_Init
                : m.kind == PushKind::kDelta     ? w::PushKind_Delta
                : m.kind == PushKind::kClipScale ? w::PushKind_ClipScale
                                                 : w::PushKind_Gradient;
    auto encoding =
        m.encoding == PushEncoding::kThreshold ? w::PushEncoding_Threshold : w::PushEncoding_Dense;
    return {w::Body_PushRequest, w::CreatePushRequest(b, b.CreateString(m.tensor), m.part, m.worker,
                                                      m.clock, kind, encoding)
                                     .Union()};
  }
  Out operator()(const PullRequest& m) {
    return {w::Body_PullRequest,
            w::CreatePullRequest(b, b.CreateString(m.tensor), m.part, m.worker, m.min_clock,
                                 m.elements, m.accept_delta, m.have_seq, m.norm)
                .Union()};
  }
  Out operator()(const PullReply& m) {
    auto encoding =
        m.encoding == PushEncoding::kThreshold ? w::PushEncoding_Threshold : w::PushEncoding_Dense;
    return {w::Body_PullReply,
            w::CreatePullReply(b, m.clock, encoding, m.seq, m.squared_norm).Union()};
  }
  Out operator()(const SaveRequest& m) {
    return {w::Body_SaveRequest, w::CreateSaveRequest(b, m.step, m.servers, m.origin).Union()};
  }
  Out operator()(const BarrierReply& m) {
    return {w::Body_BarrierReply,
            w::CreateBarrierReply(b, m.min_value, b.CreateString(m.blob)).Union()};
  }
  Out operator()(const RingChunk& m) {
    return {w::Body_RingChunk, w::CreateRingChunk(b, m.op, m.step, m.segment).Union()};
  }
  Out operator()(const SparsePullRequest& m) {
    return {w::Body_SparsePullRequest,
            w::CreateSparsePullRequest(b, b.CreateString(m.table), m.worker, m.min_clock, m.servers,
                                       m.origin, m.norm)
                .Union()};
  }
  Out operator()(const SparsePullReply& m) {
    return {w::Body_SparsePullReply, w::CreateSparsePullReply(b, m.clock, m.squared_norm).Union()};
  }
  Out operator()(const SparsePushRequest& m) {
    return {w::Body_SparsePushRequest,
            w::CreateSparsePushRequest(b, b.CreateString(m.table), m.worker, m.clock, m.rows,
                                       m.servers, m.origin, m.clip)
                .Union()};
  }
  Out operator()(const AuthHello& m) {
    auto nonce = b.CreateVector(m.nonce.data(), m.nonce.size());
    return {w::Body_AuthHello, w::CreateAuthHello(b, m.version, nonce, m.proves).Union()};
  }
  Out operator()(const AuthProof& m) {
    auto mac = b.CreateVector(m.mac.data(), m.mac.size());
    return {w::Body_AuthProof, w::CreateAuthProof(b, mac).Union()};
  }
  Out operator()(const SaveReply& m) {
    return {w::Body_SaveReply, w::CreateSaveReply(b, b.CreateString(m.file)).Union()};
  }
};

}  // namespace

std::vector<uint8_t> EncodeHeader(const Message& message) {
  fb::FlatBufferBuilder b(256);
  auto [type, body] = std::visit(BodyEncoder{b}, message.body);
  b.Finish(w::CreateHeader(b, message.request_id, message.is_reply, type, body));
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

}  // namespace pstrain
