// Wire messages: every type survives encode/decode, and damaged or hostile
// headers are refused by the verifier and field checks with a reason.
#include "comm/transport/messages.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "comm/transport/wire_generated.h"

namespace pstrain {
namespace {

NodeInfo Node(const std::string& id, Role role, int rank) {
  return NodeInfo{id, role, "10.0.0." + std::to_string(rank + 1),
                  static_cast<uint16_t>(9000 + rank), rank};
}

Message RoundTrip(const Message& m) {
  std::vector<uint8_t> bytes = EncodeHeader(m);
  auto back = DecodeHeader(bytes.data(), bytes.size());
  REQUIRE(back.ok());
  CHECK(back->request_id == m.request_id);
  CHECK(back->is_reply == m.is_reply);
  CHECK(back->body.index() == m.body.index());
  return *back;
}

TEST_CASE("every message type round-trips") {
  RegisterRequest reg{Node("a", Role::kServer, 3), 2, 5};
  reg.topology_generation = 3;
  reg.topology_digest = 0xfedcba9876543210ULL;
  auto r = std::get<RegisterRequest>(RoundTrip({1, false, reg}).body);
  CHECK(r.topology_generation == 3);
  CHECK(r.topology_digest == 0xfedcba9876543210ULL);
  CHECK(r.node.node_id == "a");
  CHECK(r.node.role == Role::kServer);
  CHECK(r.node.host == "10.0.0.4");
  CHECK(r.node.port == 9003);
  CHECK(r.node.rank == 3);
  CHECK(r.server_num == 2);
  CHECK(r.worker_num == 5);

  CHECK(std::get<RegisterReply>(RoundTrip({2, true, RegisterReply{4}}).body).rank == 4);

  Topology t{
      {Node("s0", Role::kServer, 0), Node("w0", Role::kWorker, 0), Node("w1", Role::kWorker, 1)},
      7,
      1,
      5};
  auto t2 = std::get<Topology>(RoundTrip({3, false, t}).body);
  REQUIRE(t2.nodes.size() == 3);
  CHECK(t2.generation == 7);
  CHECK(t2.server_num == 1);
  CHECK(t2.worker_num == 5);
  CHECK(t2.nodes[2].node_id == "w1");
  CHECK(t2.nodes[2].role == Role::kWorker);
  CHECK(t2.base_generation == -1);  // the whole list
  Topology delta{{Node("w1", Role::kWorker, 1)}, 8, 1, 5, 7};
  auto delta2 = std::get<Topology>(RoundTrip({3, false, delta}).body);
  CHECK(delta2.base_generation == 7);
  CHECK(delta2.delta());
  CHECK(delta2.nodes.size() == 1);

  RoundTrip({0, false, Heartbeat{}});
  auto hb = std::get<Heartbeat>(RoundTrip({0, false, Heartbeat{42, 1234.5}}).body);
  CHECK(hb.step == 42);
  CHECK(hb.samples_per_s == 1234.5);
  CHECK(hb.validation == -1);
  auto validated =
      std::get<Heartbeat>(RoundTrip({0, false, Heartbeat{42, 1.0, -1, 0.8125, 3, "auc"}}).body);
  CHECK(validated.validation == 0.8125);
  CHECK(validated.validation_epoch == 3);
  CHECK(validated.validation_metric == "auc");
  CHECK(std::get<BarrierRequest>(
            RoundTrip({5, false, BarrierRequest{BarrierGroup::kWorkers, 0, ""}}).body)
            .group == BarrierGroup::kWorkers);
  CHECK(std::get<BarrierReply>(RoundTrip({5, true, BarrierReply{3, "blob"}}).body).blob == "blob");
  RoundTrip({6, false, Done{}});
  CHECK(std::get<Shutdown>(RoundTrip({7, false, Shutdown{"bye"}}).body).reason == "bye");
  // Recovery and stopping (roles/scheduler/scheduler.h steps 5, 6, 9, 10).
  auto ended = std::get<Shutdown>(RoundTrip({7, false, Shutdown{"lost", true, false}}).body);
  CHECK(ended.failed);
  CHECK_FALSE(ended.stopped);
  CHECK(std::get<Shutdown>(RoundTrip({7, false, Shutdown{"sig", false, true}}).body).stopped);
  auto pause = std::get<Pause>(RoundTrip({7, false, Pause{"lost worker 1", 4}}).body);
  CHECK(pause.reason == "lost worker 1");
  CHECK(pause.generation == 4);
  auto failed = std::get<NodeFailed>(RoundTrip({7, false, NodeFailed{"peer gone", true}}).body);
  CHECK(failed.recoverable);
  CHECK(failed.peer_rank == -1);  // no peer named
  auto cut = std::get<NodeFailed>(
      RoundTrip({7, false, NodeFailed{"cut from server 1", true, Role::kServer, 1}}).body);
  CHECK(cut.peer_role == Role::kServer);
  CHECK(cut.peer_rank == 1);
  CHECK(std::get<StopRequest>(RoundTrip({7, false, StopRequest{"SIGTERM"}}).body).reason ==
        "SIGTERM");
  // Elastic jobs: a leave, a scale, a change of shape, the bounds.
  CHECK(std::get<StopRequest>(RoundTrip({7, false, StopRequest{"SIGTERM", true}}).body).leave);
  CHECK_FALSE(std::get<StopRequest>(RoundTrip({7, false, StopRequest{"SIGTERM"}}).body).leave);
  auto scale = std::get<ScaleRequest>(RoundTrip({7, false, ScaleRequest{3, -1}}).body);
  CHECK(scale.workers == 3);
  CHECK(scale.servers == -1);
  CHECK(std::get<ScaleReply>(RoundTrip({7, true, ScaleReply{"3 workers"}}).body).message ==
        "3 workers");
  // A server joining live, the workers growing to it, the chief's report.
  CHECK(std::get<RegisterReply>(RoundTrip({2, true, RegisterReply{4, 1, true}}).body).live);
  auto grow = std::get<Stop>(RoundTrip({7, false, Stop{"grow", 40, 3}}).body);
  CHECK(grow.at_step == 40);
  CHECK(grow.servers == 3);
  CHECK(grow.slots.empty());
  // A shrink in which server 2 takes the rank of server 0, which leaves.
  auto shrink = std::get<Stop>(RoundTrip({7, false, Stop{"shrink", 40, 2, {2, 1}}}).body);
  CHECK(shrink.slots == std::vector<int>{2, 1});
  // A worker lost: the others stop before step 41, finishing step 40 without it.
  auto lost = std::get<Stop>(RoundTrip({7, false, Stop{"lost", 41, 0, {}, {2}}}).body);
  CHECK(lost.lost == std::vector<int>{2});
  CHECK(lost.lost_from == -1);
  // async: worker 2 pushed nothing from step 38; the others drop it at 41.
  auto dropped =
      std::get<Stop>(RoundTrip({7, false, Stop{"lost", 41, 0, {}, {2}, 2, {0, 1, -1}, 38}}).body);
  CHECK(dropped.lost_from == 38);
  auto where = std::get<StopReply>(RoundTrip({7, true, StopReply{41, 30}}).body);
  CHECK(where.step == 41);
  CHECK(where.rest_from == 30);
  CHECK(std::get<StopReply>(RoundTrip({7, true, StopReply{41}}).body).rest_from == -1);
  auto replicated_change = std::get<Replicate>(
      RoundTrip({7, false, Replicate{"fc.w", 3, ReplicaKind::kUpdate, 1, 12}}).body);
  CHECK(replicated_change.tensor == "fc.w");
  CHECK(replicated_change.part == 3);
  CHECK(replicated_change.kind == ReplicaKind::kUpdate);
  CHECK(replicated_change.worker == 1);
  CHECK(replicated_change.seq == 12);
  CHECK(replicated_change.origin == -1);
  CHECK(std::get<Replicate>(
            RoundTrip({7, false, Replicate{"w", 0, ReplicaKind::kState, -1, 1, 2}}).body)
            .origin == 2);
  CHECK(std::get<Replicate>(
            RoundTrip({7, false, Replicate{"emb.weight", 0, ReplicaKind::kTableOps, 1, 4, 2}}).body)
            .kind == ReplicaKind::kTableOps);
  CHECK(
      std::get<Replicate>(
          RoundTrip({7, false, Replicate{"emb.weight", 0, ReplicaKind::kTableRows, -1, 5, 2}}).body)
          .kind == ReplicaKind::kTableRows);
  CHECK(std::get<SparsePullRequest>(RoundTrip({7, false, SparsePullRequest{"t", 0, 0, 3, 2}}).body)
            .origin == 2);
  CHECK(std::get<SparsePushRequest>(RoundTrip({7, false, SparsePushRequest{"t", 0, 0, 1, 3}}).body)
            .origin == -1);
  CHECK(std::get<SaveRequest>(RoundTrip({7, false, SaveRequest{40, 3, 1}}).body).origin == 1);
  CHECK(std::get<SaveRequest>(RoundTrip({7, false, SaveRequest{40, 3}}).body).origin == -1);
  auto view = std::get<ServerView>(RoundTrip({7, false, ServerView{2, 1, {0, 2}, {0, 2, 2}}}).body);
  CHECK(view.view == 2);
  CHECK(view.lost == 1);
  CHECK(view.live == std::vector<int>{0, 2});
  CHECK(view.owners == std::vector<int>{0, 2, 2});
  RegisterRequest replicated{Node("a", Role::kServer, 0), 3, 1, 0, false, 0};
  replicated.replicas = 2;
  CHECK(std::get<RegisterRequest>(RoundTrip({7, false, replicated}).body).replicas == 2);
  auto lose = std::get<LoseWorker>(RoundTrip({7, false, LoseWorker{2, 40, "lost"}}).body);
  CHECK(lose.rank == 2);
  CHECK(lose.last_step == 40);
  CHECK(lose.reason == "lost");
  CHECK(std::get<LoseWorkerReply>(RoundTrip({7, true, LoseWorkerReply{39}}).body).last_step == 39);
  // A live change of workers: worker 1 leaves, 2 takes its rank, a joiner takes 2.
  auto change = std::get<Stop>(RoundTrip({7, false, Stop{"w", 40, 0, {}, {}, 3, {0, -1, 1}}}).body);
  CHECK(change.workers == 3);
  CHECK(change.ranks == std::vector<int>{0, -1, 1});
  CHECK(std::get<ShapeChanged>(RoundTrip({7, false, ShapeChanged{40, 2, 0, 3}}).body).workers == 3);
  auto renumber =
      std::get<ChangeWorkers>(RoundTrip({7, false, ChangeWorkers{40, 3, {0, -1, 1}}}).body);
  CHECK(renumber.step == 40);
  CHECK(renumber.workers == 3);
  CHECK(renumber.ranks == std::vector<int>{0, -1, 1});
  RegisterRequest finishing{Node("e", Role::kWorker, -1), 2, 2};
  finishing.elastic = ElasticBounds{2, 4, -1, -1, true, true};
  const ElasticBounds back =
      std::get<RegisterRequest>(RoundTrip({7, false, finishing}).body).elastic;
  CHECK(back.finish_lost);
  CHECK(back.live_workers);
  CHECK_FALSE(back.drop_lost);
  finishing.elastic = ElasticBounds{2, 4, -1, -1, false, true, true};
  CHECK(std::get<RegisterRequest>(RoundTrip({7, false, finishing}).body).elastic.drop_lost);
  // Live moves of table rows.
  auto off = std::get<RowsHandOffRequest>(RoundTrip({8, false, RowsHandOffRequest{2, -1}}).body);
  CHECK(off.servers == 2);
  CHECK(off.rank == -1);
  auto over =
      std::get<RowsTakeOverRequest>(RoundTrip({8, false, RowsTakeOverRequest{2, 40, 1}}).body);
  CHECK(over.step == 40);
  CHECK(over.rank == 1);
  CHECK(over.phase == RowsPhase::kWhole);
  // Copied ahead of the change, then the delta at it.
  CHECK(std::get<RowsHandOffRequest>(
            RoundTrip({8, false, RowsHandOffRequest{3, 1, RowsPhase::kCopy}}).body)
            .phase == RowsPhase::kCopy);
  CHECK(std::get<RowsTakeOverRequest>(
            RoundTrip({8, false, RowsTakeOverRequest{3, 40, 2, RowsPhase::kDelta}}).body)
            .phase == RowsPhase::kDelta);
  auto ahead = std::get<PreCopyRows>(RoundTrip({8, false, PreCopyRows{3, 2, {2, 1}}}).body);
  CHECK(ahead.from == 3);
  CHECK(ahead.to == 2);
  CHECK(ahead.slots == std::vector<int>{2, 1});
  CHECK(std::get<PreCopyRows>(RoundTrip({8, false, PreCopyRows{2, 3, {}}}).body).slots.empty());
  auto digest = std::get<RowsDigestReply>(
      RoundTrip({9, true, RowsDigestReply{{"a", "b"}, {3, 4}, {5, 6}}}).body);
  CHECK(digest.tables == std::vector<std::string>{"a", "b"});
  CHECK(digest.sums == std::vector<uint64_t>{5, 6});
  auto changed = std::get<ShapeChanged>(RoundTrip({7, false, ShapeChanged{40, 3, 2}}).body);
  CHECK(changed.servers == 3);
  CHECK(changed.partitions == 2);
  CHECK(std::get<SaveRequest>(RoundTrip({7, false, SaveRequest{40, 3}}).body).servers == 3);
  // Live moves of a partition.
  auto moved = std::get<Moved>(RoundTrip({8, true, Moved{2, 9}}).body);
  CHECK(moved.rank == 2);
  CHECK(moved.version == 9);
  auto hand_off =
      std::get<HandOffRequest>(RoundTrip({8, false, HandOffRequest{"fc.w", 3, 1, 9}}).body);
  CHECK(hand_off.tensor == "fc.w");
  CHECK(hand_off.part == 3);
  CHECK(hand_off.to_rank == 1);
  CHECK(std::get<HandOffReply>(RoundTrip({8, true, HandOffReply{9}}).body).version == 9);
  auto take_over = std::get<TakeOverRequest>(
      RoundTrip({8, false, TakeOverRequest{"fc.w", 3, 9, true, 256}}).body);
  CHECK(take_over.expect);
  CHECK(take_over.elements == 256);
  CHECK(MayCarryPayload(HandOffReply{}));
  CHECK(MayCarryPayload(TakeOverRequest{}));
  CHECK_FALSE(MayCarryPayload(HandOffRequest{}));
  auto reshape = std::get<Pause>(RoundTrip({7, false, Pause{"shape", 5, 2, 3, 4}}).body);
  CHECK(reshape.rank == 2);
  CHECK(reshape.server_num == 3);
  CHECK(reshape.worker_num == 4);
  CHECK(pause.rank == -1);
  CHECK(pause.worker_num == 0);
  RegisterRequest elastic{Node("e", Role::kWorker, -1), 2, 2};
  elastic.elastic = ElasticBounds{2, 8, 1, 3};
  CHECK(std::get<RegisterRequest>(RoundTrip({7, false, elastic}).body).elastic ==
        ElasticBounds{2, 8, 1, 3});
  CHECK_FALSE(std::get<RegisterRequest>(RoundTrip({7, false, reg}).body).elastic.enabled());
  CHECK(std::get<Stop>(RoundTrip({7, false, Stop{"x", -1}}).body).at_step == -1);
  CHECK(std::get<Stop>(RoundTrip({7, false, Stop{"x", 12}}).body).at_step == 12);
  CHECK(std::get<StopReply>(RoundTrip({7, true, StopReply{11}}).body).step == 11);
  RegisterRequest rejoin{Node("w", Role::kWorker, 1), 2, 2, 30.5, true, 3};
  auto rejoin2 = std::get<RegisterRequest>(RoundTrip({7, false, rejoin}).body);
  CHECK(rejoin2.node.rank == 1);
  CHECK(rejoin2.recovery_wait_s == 30.5);
  CHECK(rejoin2.rejoin);
  CHECK(rejoin2.generation == 3);
  CHECK(std::get<RegisterReply>(RoundTrip({7, true, RegisterReply{1, 3}}).body).generation == 3);
  CHECK(std::get<Hello>(RoundTrip({8, false, Hello{Node("w", Role::kWorker, 1), "", 0}}).body)
            .node.node_id == "w");
  RoundTrip({9, true, Ack{}});
  CHECK(std::get<ErrorReply>(RoundTrip({10, true, ErrorReply{"no"}}).body).message == "no");

  auto push = std::get<PushRequest>(
      RoundTrip({11, false, PushRequest{"fc1.weight", 3, 2, 17, PushKind::kInit}}).body);
  CHECK(push.tensor == "fc1.weight");
  CHECK(push.part == 3);
  CHECK(push.worker == 2);
  CHECK(push.clock == 17);
  CHECK(push.kind == PushKind::kInit);
  auto pull = std::get<PullRequest>(RoundTrip({12, false, PullRequest{"b", 1, 0, 9, 250}}).body);
  CHECK(pull.tensor == "b");
  CHECK(pull.min_clock == 9);
  CHECK(pull.elements == 250);
  CHECK(std::get<PullReply>(RoundTrip({13, true, PullReply{44}}).body).clock == 44);
  // train.clip_norm's messages: a norm pull and its answer, a clip factor.
  PullRequest norm{"b", 1, 0, 9, 250};
  norm.norm = true;
  CHECK(std::get<PullRequest>(RoundTrip({12, false, norm}).body).norm);
  CHECK_FALSE(pull.norm);
  PullReply squares{10};
  squares.squared_norm = 2.5e-3;
  CHECK(std::get<PullReply>(RoundTrip({13, true, squares}).body).squared_norm == 2.5e-3);
  CHECK(std::get<PushRequest>(
            RoundTrip({11, false, PushRequest{"b", 0, 1, 9, PushKind::kClipScale}}).body)
            .kind == PushKind::kClipScale);
  norm.accept_delta = true;
  std::vector<uint8_t> both = EncodeHeader({12, false, norm});
  CHECK(DecodeHeader(both.data(), both.size()).status().message() == "a norm pull takes no delta");
  // A norm pull's step is one a server can hold.
  for (int64_t step : {int64_t{-1}, std::numeric_limits<int64_t>::max()}) {
    PullRequest dense{"b", 0, 0, step, 3};
    dense.norm = true;
    SparsePullRequest table{"t", 0, step, 1};
    table.norm = true;
    for (const MessageBody& body : {MessageBody(dense), MessageBody(table)}) {
      std::vector<uint8_t> bytes = EncodeHeader({12, false, body});
      CHECK(DecodeHeader(bytes.data(), bytes.size()).status().message() ==
            "a norm pull of step " + std::to_string(step));
    }
  }
  CHECK(std::get<SaveRequest>(RoundTrip({14, false, SaveRequest{300}}).body).step == 300);
  auto chunk = std::get<RingChunk>(RoundTrip({0, false, RingChunk{77, 5}}).body);
  CHECK(chunk.op == 77);
  CHECK(chunk.step == 5);
  CHECK(std::get<SaveReply>(RoundTrip({15, true, SaveReply{"server-1.ckpt"}}).body).file ==
        "server-1.ckpt");
}

TEST_CASE(
    "elastic bounds out of order or range, a negative scale or rank, and a move to a negative rank "
    "or of no values are refused") {
  for (ElasticBounds bad :
       {ElasticBounds{0, 4, -1, -1}, ElasticBounds{5, 4, -1, -1}, ElasticBounds{1, 70000, -1, -1},
        ElasticBounds{1, 4, 3, 2}, ElasticBounds{1, 4, -1, 2}, ElasticBounds{1, 4, -2, -2}}) {
    RegisterRequest req{Node("e", Role::kWorker, -1), 2, 2};
    req.elastic = bad;
    auto back =
        DecodeHeader(EncodeHeader({1, false, req}).data(), EncodeHeader({1, false, req}).size());
    CHECK_FALSE(back.ok());
    CHECK(back.status().message().find("elastic bounds") != std::string::npos);
  }
  for (const MessageBody& bad : {MessageBody(ScaleRequest{-2, 1}),
                                 MessageBody(ScaleRequest{1, 70000}),
                                 MessageBody(Pause{"x", 1, -2, 1, 1}),
                                 MessageBody(Pause{"x", 1, 0, -1, 1}),
                                 MessageBody(Moved{-1, 1}),
                                 MessageBody(Moved{1, -1}),
                                 MessageBody(Stop{"x", 4, -1}),
                                 MessageBody(ShapeChanged{4, 0, 1}),
                                 MessageBody(ShapeChanged{-1, 2, 1}),
                                 MessageBody(SaveRequest{4, -1}),
                                 MessageBody(HandOffRequest{"w", 0, -1, 1}),
                                 MessageBody(HandOffRequest{"", 0, 1, 1}),
                                 MessageBody(TakeOverRequest{"w", 0, 1, true, 0}),
                                 MessageBody(TakeOverRequest{"w", 0, -1, true, 4}),
                                 MessageBody(Stop{"x", 4, 2, {0}}),
                                 MessageBody(Stop{"x", 4, 2, {1, 1}}),
                                 MessageBody(Stop{"x", 4, 2, {0, -1}}),
                                 MessageBody(Stop{"x", 4, 0, {}, {-1}}),
                                 MessageBody(LoseWorker{-1, 4, "x"}),
                                 MessageBody(LoseWorker{1, -2, "x"}),
                                 MessageBody(LoseWorkerReply{-2}),
                                 MessageBody(Stop{"x", 4, 0, {}, {}, 2, {0, 1}, 3}),
                                 MessageBody(Stop{"x", 4, 0, {}, {1}, 2, {0, -1}, 5}),
                                 MessageBody(Stop{"x", 4, 0, {}, {1}, 2, {0, -1}, -2}),
                                 MessageBody(StopReply{4, 5}),
                                 MessageBody(StopReply{4, -2}),
                                 MessageBody(Stop{"x", 4, 0, {}, {}, 2, {0, 0}}),
                                 MessageBody(Stop{"x", 4, 0, {}, {}, 2, {0, 2}}),
                                 MessageBody(Stop{"x", 4, 0, {}, {}, 2, {-1, -1}}),
                                 MessageBody(Stop{"x", 4, 0, {}, {}, 0, {0}}),
                                 MessageBody(Stop{"x", 4, 0, {}, {}, 2, {}}),
                                 MessageBody(ShapeChanged{4, 2, 0, -1}),
                                 MessageBody(ChangeWorkers{-1, 2, {0, 1}}),
                                 MessageBody(ChangeWorkers{4, 1, {0, 1}}),
                                 MessageBody(ChangeWorkers{4, 2, {-2, 1}}),
                                 MessageBody(ChangeWorkers{4, 2, {}}),
                                 MessageBody(RowsHandOffRequest{2, 2}),
                                 MessageBody(RowsHandOffRequest{0, 0}),
                                 MessageBody(RowsTakeOverRequest{2, 4, -1}),
                                 MessageBody(RowsTakeOverRequest{2, -1, 0}),
                                 MessageBody(RowsHandOffRequest{2, 1, RowsPhase{3}}),
                                 MessageBody(RowsTakeOverRequest{2, 4, 1, RowsPhase{-1}}),
                                 MessageBody(PreCopyRows{2, 2, {}}),
                                 MessageBody(PreCopyRows{0, 2, {}}),
                                 MessageBody(PreCopyRows{2, 3, {0, 1, 2}}),
                                 MessageBody(PreCopyRows{3, 2, {0}}),
                                 MessageBody(PreCopyRows{3, 2, {1, 1}}),
                                 MessageBody(PreCopyRows{3, 2, {0, 3}}),
                                 MessageBody(Replicate{"", 0, ReplicaKind::kUpdate, -1, 1}),
                                 MessageBody(Replicate{"w", 0, ReplicaKind::kUpdate, -1, 0}),
                                 MessageBody(Replicate{"w", 0, ReplicaKind::kUpdate, -2, 1}),
                                 MessageBody(Replicate{"w", 0, ReplicaKind{5}, -1, 1}),
                                 MessageBody(ServerView{0, -1, {0}, {0}}),
                                 MessageBody(SaveRequest{4, 2, -2}),
                                 MessageBody(Replicate{"w", 0, ReplicaKind::kState, -1, 1, -2}),
                                 MessageBody(ServerView{1, -1, {}, {0}}),
                                 MessageBody(ServerView{1, 2, {0}, {0, 0}}),
                                 MessageBody(ServerView{1, 1, {0, 1}, {0, 0}}),
                                 MessageBody(ServerView{1, 1, {0}, {0, 1}}),
                                 MessageBody(ServerView{1, -1, {1, 0}, {0, 1}}),
                                 MessageBody(ServerView{1, -1, {0, 0}, {0, 0}}),
                                 MessageBody(SparsePullRequest{"t", 0, 0, 0}),
                                 MessageBody(SparsePushRequest{"t", 0, 0, 1, 0}),
                                 MessageBody(SparsePullRequest{"t", 0, 0, 2, 2}),
                                 MessageBody(SparsePushRequest{"t", 0, 0, 1, 2, -2})}) {
    const std::vector<uint8_t> header = EncodeHeader({1, false, bad});
    CHECK_FALSE(DecodeHeader(header.data(), header.size()).ok());
  }
}

TEST_CASE("a recovery wait that is negative, not a number or beyond a week is refused") {
  for (double wait : {-1.0, std::nan(""), 1e9}) {
    RegisterRequest r{Node("a", Role::kWorker, 0), 1, 1, wait, false, 0};
    std::vector<uint8_t> bytes = EncodeHeader({1, false, r});
    auto m = DecodeHeader(bytes.data(), bytes.size());
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message().find("recovery_wait_s") != std::string::npos);
  }
}

TEST_CASE("damaged headers are refused with a reason") {
  std::vector<uint8_t> good =
      EncodeHeader({1, false, RegisterRequest{Node("a", Role::kWorker, 0), 1, 1}});
  SUBCASE("truncated") {
    int refused = 0;
    for (size_t n = 0; n < good.size(); ++n) {
      auto m = DecodeHeader(good.data(), n);
      // Cutting only the builder's trailing padding leaves the message whole.
      if (m.ok()) {
        CHECK(std::get<RegisterRequest>(m->body).node.node_id == "a");
      } else {
        ++refused;
      }
    }
    CHECK(refused >= static_cast<int>(good.size()) - 8);
  }
  SUBCASE("every single-byte corruption is refused or decodes to sane values") {
    for (size_t i = 0; i < good.size(); ++i) {
      for (uint8_t v : {uint8_t{0}, uint8_t{0xff}, uint8_t{0x7f}}) {
        std::vector<uint8_t> bad = good;
        bad[i] = v;
        auto m = DecodeHeader(bad.data(), bad.size());  // must not crash
        if (m.ok()) CHECK(m->body.index() < std::variant_size_v<MessageBody>);
      }
    }
  }
  SUBCASE("missing required fields") {
    std::vector<uint8_t> no_node = EncodeHeader({1, false, Hello{NodeInfo{}, "", 0}});
    auto m = DecodeHeader(no_node.data(), no_node.size());
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message().find("node_id") != std::string::npos);
  }
}

// A Topology whose `copies` entries all point at one NodeInfo with long
// strings: a small header that would decode to copies x 8000 bytes.
std::vector<uint8_t> SharedNodeTopology(int copies) {
  flatbuffers::FlatBufferBuilder b;
  auto node = wire::CreateNodeInfo(b, b.CreateString(std::string(4000, 'n')), wire::Role_Worker,
                                   b.CreateString(std::string(4000, 'h')), 1, 0);
  std::vector<flatbuffers::Offset<wire::NodeInfo>> nodes(copies, node);
  auto topology = wire::CreateTopology(b, b.CreateVector(nodes), 0);
  b.Finish(wire::CreateHeader(b, 1, false, wire::Body_Topology, topology.Union()));
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

TEST_CASE("a topology cannot expand shared strings into gigabytes") {
  std::vector<uint8_t> many = SharedNodeTopology(20000);
  auto decoded = DecodeHeader(many.data(), many.size());
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.status().message() == "topology of 20000 nodes (at most 8192)");
  std::vector<uint8_t> shared = SharedNodeTopology(8000);  // 64 MB of text in 40 kB
  decoded = DecodeHeader(shared.data(), shared.size());
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.status().message().find("shared strings") != std::string::npos);
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
TEST_CASE("a topology delta from a generation below -1 or past its own is refused") {
  // A Topology as an older sender writes it has no base_generation: the whole list.
  flatbuffers::FlatBufferBuilder b;
  b.Finish(wire::CreateHeader(b, 1, false, wire::Body_Topology,
                              wire::CreateTopology(b, 0, 3, 1, 2).Union()));
  auto old = DecodeHeader(b.GetBufferPointer(), b.GetSize());
  REQUIRE(old.ok());
  CHECK(std::get<Topology>(old->body).base_generation == -1);
  for (auto [generation, base] : {std::pair<int64_t, int64_t>{3, -2}, {3, 4}, {-1, -1}}) {
    std::vector<uint8_t> bytes = EncodeHeader({1, false, Topology{{}, generation, 1, 2, base}});
    auto decoded = DecodeHeader(bytes.data(), bytes.size());
    INFO(generation, " from ", base);
    REQUIRE_FALSE(decoded.ok());
    CHECK(decoded.status().message().find("as a delta from generation") != std::string::npos);
  }
}

TEST_CASE("a heartbeat with a negative or non-finite rate, or a step below -1, is refused") {
  for (Heartbeat bad :
       {Heartbeat{-2, 0}, Heartbeat{1, -1.0}, Heartbeat{1, std::nan("")},
        Heartbeat{1, std::numeric_limits<double>::infinity()}, Heartbeat{1, 0, -1, -0.5, 1, "auc"},
        Heartbeat{1, 0, -1, std::nan(""), 1, "auc"}, Heartbeat{1, 0, -1, 0.5, -1, "auc"},
        Heartbeat{1, 0, -1, 0.5, 1, "AUC"}, Heartbeat{1, 0, -1, 0.5, 1, std::string(17, 'a')}}) {
    std::vector<uint8_t> bytes = EncodeHeader({0, false, bad});
    auto back = DecodeHeader(bytes.data(), bytes.size());
    REQUIRE_FALSE(back.ok());
    CHECK(back.status().message().find("Heartbeat") != std::string::npos);
  }
}
}  // namespace pstrain
