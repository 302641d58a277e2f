// What each message is, apart from its bytes (comm/transport/messages.h): its
// name in logs and errors, and which kinds may carry a payload, belong to the
// handshake, wait on other nodes or carry pulled values.
#include <iterator>
#include <variant>

#include "comm/transport/messages.h"

namespace pstrain {

const char* BarrierGroupName(BarrierGroup group) {
  switch (group) {
    case BarrierGroup::kAll:
      return "all nodes";
    case BarrierGroup::kServers:
      return "servers";
    case BarrierGroup::kWorkers:
      return "workers";
  }
  return "?";
}

const char* MessageName(const MessageBody& body) {
  static const char* const kNames[] = {"RegisterRequest",
                                       "RegisterReply",
                                       "Topology",
                                       "Heartbeat",
                                       "BarrierRequest",
                                       "Done",
                                       "Shutdown",
                                       "Hello",
                                       "Ack",
                                       "Error",
                                       "PushRequest",
                                       "PullRequest",
                                       "PullReply",
                                       "SaveRequest",
                                       "SaveReply",
                                       "BarrierReply",
                                       "RingChunk",
                                       "SparsePullRequest",
                                       "SparsePullReply",
                                       "SparsePushRequest",
                                       "Pause",
                                       "NodeFailed",
                                       "StopRequest",
                                       "Stop",
                                       "StopReply",
                                       "AuthHello",
                                       "AuthProof",
                                       "ScaleRequest",
                                       "ScaleReply",
                                       "Moved",
                                       "HandOffRequest",
                                       "HandOffReply",
                                       "TakeOverRequest",
                                       "ShapeChanged",
                                       "RowsHandOffRequest",
                                       "RowsHandOffReply",
                                       "RowsTakeOverRequest",
                                       "RowsDigestRequest",
                                       "RowsDigestReply",
                                       "LoseWorker",
                                       "LoseWorkerReply",
                                       "ChangeWorkers",
                                       "PreCopyRows",
                                       "Replicate",
                                       "ServerView"};
  static_assert(std::size(kNames) == std::variant_size_v<MessageBody>);
  return kNames[body.index()];
}

bool MayCarryPayload(const MessageBody& body) {
  return std::holds_alternative<PushRequest>(body) || std::holds_alternative<PullReply>(body) ||
         std::holds_alternative<RingChunk>(body) ||
         std::holds_alternative<SparsePullRequest>(body) ||
         std::holds_alternative<SparsePullReply>(body) ||
         std::holds_alternative<SparsePushRequest>(body) ||
         std::holds_alternative<HandOffReply>(body) ||
         std::holds_alternative<TakeOverRequest>(body) ||
         std::holds_alternative<RowsHandOffReply>(body) ||
         std::holds_alternative<RowsTakeOverRequest>(body) ||
         std::holds_alternative<Replicate>(body);
}

bool IsHandshake(const MessageBody& body) {
  return std::holds_alternative<AuthHello>(body) || std::holds_alternative<AuthProof>(body);
}

bool MayWaitOnOthers(const MessageBody& body) {
  return std::holds_alternative<BarrierRequest>(body);
}

bool IsPulledValues(const MessageBody& body) {
  return std::holds_alternative<PullReply>(body) || std::holds_alternative<SparsePullReply>(body);
}

}  // namespace pstrain
