// Plain C++ forms of the wire messages in wire.fbs. FlatBuffers types stay
// inside messages.cc: everything else speaks these structs, and the two are
// converted in exactly one place (EncodeHeader / DecodeHeader).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "src/common/config/options.h"
#include "src/common/status.h"

namespace pstrain {

enum class BarrierGroup { kAll, kServers, kWorkers };
const char* BarrierGroupName(BarrierGroup group);

struct NodeInfo {
  std::string node_id;
  Role role = Role::kWorker;
  std::string host;
  uint16_t port = 0;
  int rank = -1;
};

// node.rank: the rank the node asks for, -1 for any.
struct RegisterRequest {
  NodeInfo node;
  int server_num = 0;
  int worker_num = 0;
  double recovery_wait_s = 0;  // 0: the job ends when a node is lost
  bool rejoin = false;         // a running node that lost the scheduler
  int64_t generation = 0;      // rejoin: the generation it runs in
  std::string config;          // JobConfigText of the node's config
  // The topology the node holds (-1: none), and TopologyDigest of it
  // (roles/node/peers.h).
  int64_t topology_generation = -1;
  uint64_t topology_digest = 0;
  ElasticBounds elastic;  // the node's config's train.elastic
  int replicas = 0;       // the node's config's train.replication.replicas
};
struct RegisterReply {
  int rank = -1;
  int64_t generation = 0;
  bool live = false;  // joins a running elastic job: no checkpoint, no start barrier
};
struct Topology {
  std::vector<NodeInfo> nodes;  // the receiver's peers, with ranks (roles/node/peers.h)
  int64_t generation = 0;       // how many times the job rolled back
  int server_num = 0;           // the job's shape
  int worker_num = 0;
  // -1: `nodes` is the whole list. Else a delta: `nodes` holds only the peers
  // that changed since the receiver's topology of this generation.
  int64_t base_generation = -1;
  bool delta() const { return base_generation >= 0; }
};
struct Heartbeat {
  int64_t step = -1;         // a worker's steps done; -1: nothing to report
  double samples_per_s = 0;  // its training rate, finite and >= 0
  int64_t held_view = -1;    // a server's backups hold all it holds as of this view
  // A chief's last validation measure (-1: none; else finite, >= 0), the
  // epoch it ended, and its metric's name ("auc": letters, at most 16).
  double validation = -1;
  int validation_epoch = 0;
  std::string validation_metric;
};
struct BarrierRequest {
  BarrierGroup group = BarrierGroup::kAll;
  int64_t value = 0;  // the reply carries the smallest value of the group
  std::string blob;   // and the lowest-ranked member's non-empty blob
};
struct BarrierReply {
  int64_t min_value = 0;
  std::string blob;
};
// One step of a ring collective; the chunk's floats are the payload.
struct RingChunk {
  uint64_t op = 0;
  int step = 0;
  int segment = 0;  // which piece of the step's chunk
};
struct Done {};
struct Shutdown {
  std::string reason;
  bool failed = false;   // the job was ended: the node exits 1
  bool stopped = false;  // stopped on request before its end (SIGTERM)
};
// The job lost a node: drop everything, register again, resume from the
// newest complete checkpoint.
// A change of an elastic job's shape pauses it too: the checkpoint is then
// of the step every worker stopped at, and the node registers with the rank
// and shape given here.
struct Pause {
  std::string reason;
  int64_t generation = 0;  // the generation to register for
  int rank = -1;           // the rank to register with; -1: the one it held
  int server_num = 0;      // the job's new shape; 0 workers: unchanged
  int worker_num = 0;
};
// A node hit an error it cannot recover from (not a lost peer).
struct NodeFailed {
  std::string reason;
  bool recoverable = false;  // it lost a peer: with recovery, roll back
  // The peer it lost (server or worker), when it knows; rank -1: none named.
  Role peer_role = Role::kWorker;
  int peer_rank = -1;
};
// A node got SIGTERM or SIGINT: stop the job cleanly.
// In an elastic job, `leave`: only the sender leaves (the job goes on).
struct StopRequest {
  std::string reason;
  bool leave = false;
};
// `pstrain scale`: the shape an elastic job should have (-1: unchanged).
struct ScaleRequest {
  int workers = -1;
  int servers = -1;
};
// What the scheduler makes of it, one line.
struct ScaleReply {
  std::string message;
};
// To a worker: at_step -1 asks its step (reply StopReply); at_step N >= 0
// tells it to stop once step N is done.
struct Stop {
  std::string reason;
  int64_t at_step = -1;
  // > 0: an elastic job gains servers live; at at_step the workers connect
  // to them and the chief moves partitions (roles/worker/grow.h), then
  // training goes on.
  int servers = 0;
  // With servers: for each rank of the new placement, the rank its server
  // holds now; empty: the ranks below `servers` keep theirs.
  std::vector<int> slots;
  // With at_step: the worker ranks lost; the others finish the step under
  // way without them, and stop before at_step.
  std::vector<int> lost;
  // > 0: the job goes on with that many workers from at_step, live;
  // ranks[r]: the rank worker r holds then (-1: it leaves).
  int workers = 0;
  std::vector<int> ranks;
  // With lost: the first step they pushed nothing of (-1: at_step). The
  // batches they had from there to at_step are made up by the others
  // (roles/checkpoint/worker_place.h, WithUntrainedBatches).
  int64_t lost_from = -1;
};
// The chief to the scheduler: from `step` on the job runs with `servers`
// servers, `partitions` of them moved live.
struct ShapeChanged {
  int64_t step = 0;
  int servers = 0;
  int partitions = 0;
  int workers = 0;  // > 0: every worker is at `step` for a live change of workers
};
struct StopReply {
  int64_t step = 0;  // steps this worker has started
  // The first step whose untrained batches can still be made up at `step`
  // (where its epoch's rest begins; -1: unknown).
  int64_t rest_from = -1;
};
struct Hello {
  NodeInfo node;
  std::string shm_name;  // ring peers: the shared-memory channel offered
  uint64_t shm_nonce = 0;
  int64_t generation = -1;  // the sender's, from its RegisterReply
};
struct Ack {};
struct ErrorReply {
  std::string message;
};

// The handshake that opens every connection (comm/transport/handshake.h).
inline constexpr size_t kAuthNonceBytes = 32;
inline constexpr size_t kAuthMacBytes = 32;  // HMAC-SHA256
struct AuthHello {
  uint32_t version = 0;  // of the handshake (kHandshakeVersion)
  std::array<uint8_t, kAuthNonceBytes> nonce{};
  bool proves = false;  // the sender has a token and will send an AuthProof
};
struct AuthProof {
  std::array<uint8_t, kAuthMacBytes> mac{};
};

// Parameter-server messages: one partition of a tensor each; the float32
// values travel as the frame's payload.
// kDelta: mode average, a worker's weight change since its last pull, for
// averaging round `clock` (roles/server/partition.h).
// kClipScale: train.clip_norm, step `clock`'s factor min(1, clip_norm /
// global norm), one float32, applied to the step's gathered gradient.
enum class PushKind { kGradient, kInit, kDelta, kClipScale };
// kThreshold: the payload is one threshold message (optim/threshold_codec.h)
// for the partition's elements instead of float32 values; gradients only.
enum class PushEncoding { kDense, kThreshold };
struct PushRequest {
  std::string tensor;
  uint32_t part = 0;
  int worker = 0;
  int64_t clock = 0;  // the worker's step (kDelta: the averaging round)
  PushKind kind = PushKind::kGradient;
  PushEncoding encoding = PushEncoding::kDense;
};
struct PullRequest {
  std::string tensor;
  uint32_t part = 0;
  int worker = 0;
  int64_t min_clock = 0;  // answer once the partition's clock reaches this
  int64_t elements = 0;   // the partition's size as the worker knows it
  // A compressed pull: the worker holds what the reply `have_seq` (0:
  // none) left and takes the largest changes since as an exact-value
  // threshold message (roles/server/pull_deltas.h).
  bool accept_delta = false;
  uint64_t have_seq = 0;
  // train.clip_norm: the squared norm of step min_clock's mean gradient
  // over the partition instead of the values, once every worker's is in.
  bool norm = false;
};
struct PullReply {
  int64_t clock = 0;
  // kThreshold: the payload is the largest changes since the reply the
  // request named, to add to what that reply left; kDense: the values.
  PushEncoding encoding = PushEncoding::kDense;
  uint64_t seq = 0;         // with accept_delta: the copy this reply leaves, for the next pull
  double squared_norm = 0;  // a norm pull's answer (no payload)
};
struct SaveRequest {
  int64_t step = 0;  // written to the server's own checkpoint dir
  int servers = 0;   // the chief's placement's server count (0: the server's own)
  int origin = -1;   // whose partitions, as that rank's file (-1: the server's own)
};
struct SaveReply {
  std::string file;  // written inside the step's directory
};

// Embedding rows (server-held tables): ids, then rows, as the payload.
struct SparsePullRequest {
  std::string table;
  int worker = 0;
  int64_t min_clock = 0;  // answer once the table has applied this many steps
  int servers = 0;        // the placement the ids were grouped by
  int origin = -1;        // the rank that placement puts them on (-1: the receiver's)
  bool norm = false;      // train.clip_norm: no ids; the reply's squared_norm
};
struct SparsePullReply {
  int64_t clock = 0;
  double squared_norm = 0;  // a norm pull's answer (no payload)
};
struct SparsePushRequest {
  std::string table;
  int worker = 0;
  int64_t clock = 0;  // the worker's step
  int64_t rows = 0;   // ids in the payload, each followed later by a row
  int servers = 0;    // the placement the ids were grouped by
  int origin = -1;    // the rank that placement puts them on (-1: the receiver's)
  float clip = 0;     // train.clip_norm: > 0, step `clock`'s factor (no rows)
};

// Live moves of a partition between servers (roles/server/handoff.h).
// To a push or pull of a partition handed off: it lives on server `rank`
// since placement `version`.
struct Moved {
  int rank = 0;
  int64_t version = 0;
};
// Chief -> old owner: give up (tensor, part) to server `to_rank`; the reply
// (HandOffReply) carries its state as the payload.
struct HandOffRequest {
  std::string tensor;
  uint32_t part = 0;
  int to_rank = 0;
  int64_t version = 0;
};
struct HandOffReply {
  int64_t version = 0;
};
// Chief -> new owner. expect: hold the partition's requests until its state
// comes (no payload); a payload: the state to install; neither: the move
// was called off (what was held is answered with an error).
struct TakeOverRequest {
  std::string tensor;
  uint32_t part = 0;
  int64_t version = 0;
  bool expect = false;
  int64_t elements = 0;  // the partition's size
};

// Live moves of embedding-table rows (roles/server/table_moves.h), whole
// at the change, or copied ahead while the job trains and then the delta
// since the copy at the change.
enum class RowsPhase : int { kWhole = 0, kCopy = 1, kDelta = 2 };
// Chief -> a server: give up every row that a placement over `servers`
// puts elsewhere; the reply carries them as the payload.
struct RowsHandOffRequest {
  int servers = 0;
  int rank = 0;  // the server's rank in the new placement; -1: it leaves
  RowsPhase phase = RowsPhase::kWhole;
};
struct RowsHandOffReply {
  int64_t rows = 0;
  int64_t step = 0;  // the steps its tables have applied
};
// Chief -> a server: install the rows of the payload, hold `rank` and
// place rows over `servers` from now on; a server that joined live starts
// its tables at `step`.
struct RowsTakeOverRequest {
  int servers = 0;
  int64_t step = 0;
  int rank = 0;  // the server's rank in the new placement, which it takes
  RowsPhase phase = RowsPhase::kWhole;
};
// Scheduler -> the chief worker, before a live change of the servers from
// `from` to `to` (slots: as Stop's): copy ahead the table rows it will move.
struct PreCopyRows {
  int from = 0;
  int to = 0;
  std::vector<int> slots;
};
// A fingerprint of every table's rows (ServerRows::Digest), for tests.
// A lost worker of a sync elastic job (comm/transport/wire.fbs).
struct LoseWorker {
  int rank = 0;
  int64_t last_step = -1;
  std::string reason;
};
struct LoseWorkerReply {
  int64_t last_step = -1;
};
// A live change of an elastic job's workers (comm/transport/wire.fbs).
struct ChangeWorkers {
  int64_t step = 0;
  int workers = 0;
  std::vector<int> ranks;  // per worker rank today: its rank from `step` (-1: it left)
};
// A primary's change of a partition, to a server backing it up
// (comm/transport/wire.fbs, roles/server/replication.h).
enum class ReplicaKind : int8_t {
  kState = 0,
  kUpdate = 1,
  kTableState = 2,
  kTableOps = 3,
  kTableRows = 4,  // a tiered table's rows on disk, after its kTableState
};
// The kinds a server-held table's share sends (roles/server/table_host.h).
inline bool IsTableReplica(ReplicaKind kind) {
  return kind == ReplicaKind::kTableState || kind == ReplicaKind::kTableOps ||
         kind == ReplicaKind::kTableRows;
}
struct Replicate {
  std::string tensor;
  uint32_t part = 0;
  ReplicaKind kind = ReplicaKind::kState;
  int worker = -1;  // kUpdate: whose push it was (-1: a gathered step)
  int64_t seq = 0;  // 1, 2, ... per partition
  int origin = -1;  // kState: the rank the partition map places it on
};
// Which servers are live and which holds each server's partitions
// (comm/transport/wire.fbs, roles/scheduler/promotion.cc).
struct ServerView {
  int64_t view = 0;
  int lost = -1;
  std::vector<int> live;    // ranks, increasing
  std::vector<int> owners;  // per rank of the partition map: the server holding its partitions
};
struct RowsDigestRequest {};
struct RowsDigestReply {
  std::vector<std::string> tables;
  std::vector<int64_t> rows;
  std::vector<uint64_t> sums;
};

using MessageBody =
    std::variant<RegisterRequest, RegisterReply, Topology, Heartbeat, BarrierRequest, Done,
                 Shutdown, Hello, Ack, ErrorReply, PushRequest, PullRequest, PullReply, SaveRequest,
                 SaveReply, BarrierReply, RingChunk, SparsePullRequest, SparsePullReply,
                 SparsePushRequest, Pause, NodeFailed, StopRequest, Stop, StopReply, AuthHello,
                 AuthProof, ScaleRequest, ScaleReply, Moved, HandOffRequest, HandOffReply,
                 TakeOverRequest, ShapeChanged, RowsHandOffRequest, RowsHandOffReply,
                 RowsTakeOverRequest, RowsDigestRequest, RowsDigestReply, LoseWorker,
                 LoseWorkerReply, ChangeWorkers, PreCopyRows, Replicate, ServerView>;

struct Message {
  uint64_t request_id = 0;  // 0: one-way, no reply expected
  bool is_reply = false;
  MessageBody body;
};

// Name of the body's type, for logs and errors ("RegisterRequest").
const char* MessageName(const MessageBody& body);

// What the transport (comm/transport/connection.h) may do with a frame's payload,
// decided here so that it needs no list of message kinds. Only values (the
// floats of a tensor, embedding ids and rows) travel as payload: a message
// of any other kind with one is malformed.
bool MayCarryPayload(const MessageBody& body);
// Pulled values: a reply whose payload may be read straight into the memory
// its request named (Connection::Call's reply_into).
bool IsPulledValues(const MessageBody& body);

// AuthHello or AuthProof: the only frames a connection reads before its
// handshake is complete.
bool IsHandshake(const MessageBody& body);

// A request whose answer waits on other nodes by design (a barrier waits for
// the whole group): exempt from the per-call deadline; the scheduler's own
// deadlines bound it instead.
bool MayWaitOnOthers(const MessageBody& body);

// The FlatBuffers header bytes for `message`.
std::vector<uint8_t> EncodeHeader(const Message& message);

// Verifies (flatbuffers::Verifier plus field checks) and converts a received
// header. Never trusts the bytes: any defect is an InvalidArgument naming it.
StatusOr<Message> DecodeHeader(const uint8_t* data, size_t size);

}  // namespace pstrain
