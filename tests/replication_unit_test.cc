// Replicated partitions (roles/server/replication.h), piece by piece: where
// backups live and who takes over a lost server (roles/node/server_view.h);
// the queue that holds a push's acknowledgement and the pulls until the
// backups hold its update; a primary shard and a backup shard wired by hand,
// whose copies stay equal bit for bit in sync, async and ssp; a push a
// worker sends again to the heir of its lost primary, acknowledged and not
// applied twice; the config's bounds; the new messages' checks.
#include <doctest/doctest.h>

#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "comm/transport/messages.h"
#include "roles/node/server_view.h"
#include "roles/server/replication.h"
#include "roles/server/shard.h"
#include "src/common/config/config.h"
#include "src/common/logging.h"
#include "tests/config_test_util.h"

namespace pstrain {
namespace {

using V = std::vector<int>;

// Bytes kept alive by the buffer itself, as a received frame's are.
Buffer CopyOf(const void* data, size_t size) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(data),
                                                      static_cast<const uint8_t*>(data) + size);
  return Buffer{bytes->data(), size, bytes};
}

TEST_CASE("backups are the next live servers, and the heir of a lost one is its first") {
  CHECK(BackupsOf(0, AllServers(3), 1) == V{1});
  CHECK(BackupsOf(2, AllServers(3), 1) == V{0});
  CHECK(BackupsOf(1, AllServers(3), 2) == V{2, 0});
  CHECK(BackupsOf(0, AllServers(3), 5) == V{1, 2});  // fewer: only two others
  CHECK(BackupsOf(0, V{0}, 1).empty());
  CHECK(BackupsOf(0, V{0, 2}, 1) == V{2});  // server 1 lost
  CHECK(PrimariesBackedUpBy(0, AllServers(3), 1) == V{2});
  CHECK(PrimariesBackedUpBy(2, V{0, 2}, 1) == V{0});
  CHECK(HeirOf(1, V{0, 2}) == 2);
  CHECK(HeirOf(2, V{0, 1}) == 0);  // wrapping
  CHECK(HeirOf(0, V{}) == -1);
}

TEST_CASE("the queue releases what waits for a change once the backups hold it, in order") {
  ReplicationQueue q;
  std::vector<std::string> done;
  auto note = [&](const char* what) {
    return [&done, what](const Status& st) { done.push_back(st.ok() ? what : "failed"); };
  };
  CHECK(q.caught_up());
  q.AfterSent(note("at once"));
  CHECK(done == std::vector<std::string>{"at once"});
  q.HoldForStep(note("gathered"));  // sync: a push of a step not applied yet
  const int64_t first = q.Next();
  q.StepSent();
  q.AfterSent(note("last push"));
  const int64_t second = q.Next();
  q.AfterSent(note("pull"));
  CHECK_FALSE(q.caught_up());
  CHECK(done.size() == 1);
  q.Acked(first, Status::OK());
  CHECK(done == std::vector<std::string>{"at once", "gathered", "last push"});
  q.Acked(second, Status::OK());
  CHECK(done.back() == "pull");
  CHECK(q.caught_up());
  q.Next();
  q.AfterSent(note("x"));
  q.HoldForStep(note("y"));
  q.Acked(3, Internal("refused"));  // everything after a failure fails too
  CHECK(done.back() == "failed");
  CHECK(done.size() == 6);
  q.AfterSent(note("z"));
  CHECK(done.back() == "failed");
}

TEST_CASE("a step whose change cannot be made fails the pushes held for it") {
  ReplicationQueue q;
  std::vector<std::string> done;
  q.HoldForStep([&done](const Status& st) { done.push_back(st.message()); });
  q.HoldForStep([&done](const Status& st) { done.push_back(st.message()); });
  q.FailStep(Internal("the disk is full"));
  CHECK(done == std::vector<std::string>{"the disk is full", "the disk is full"});
  q.StepSent();  // nothing is held any more
  CHECK(done.size() == 2);
}

TEST_CASE("a replayed update counts as the primary's: a gathered step or one worker's push") {
  UpdateCore sync(2, UpdateMode::kSync);
  CHECK(sync.Replay(-1).ok());
  CHECK(sync.clock() == 1);
  CHECK(sync.last_applied_worker() == -1);
  CHECK_FALSE(sync.Replay(2).ok());
  UpdateCore ssp(2, UpdateMode::kSsp);
  CHECK(ssp.Replay(0).ok());
  CHECK(ssp.clock() == 0);
  CHECK(ssp.Replay(1).ok());
  CHECK(ssp.clock() == 1);
  CHECK(ssp.last_applied_worker() == 1);
}

// A primary shard and a backup shard, each running its closures at once,
// with the changes between them delivered by hand.
struct Pair {
  Config config;
  std::deque<std::pair<Replicate, std::vector<uint8_t>>> in_flight;
  std::deque<std::function<void(const Status&)>> answers;
  std::unique_ptr<PsShard> primary, backup;
  std::vector<std::string> replies;

  explicit Pair(UpdateMode mode, const char* optimizer = "{type: adam, lr: 0.01}") {
    config = testing::Parse(std::string("train: {mode: ") +
                            (mode == UpdateMode::kSync    ? "sync"
                             : mode == UpdateMode::kAsync ? "async"
                                                          : "ssp, staleness: 1") +
                            ", optimizer: " + optimizer + "}");
    auto inline_run = [](std::function<void()> fn) { fn(); };
    primary = std::make_unique<PsShard>(&config, 2, MakeLogger("primary"), inline_run);
    backup = std::make_unique<PsShard>(&config, 2, MakeLogger("backup"), inline_run);
    primary->ReplicateTo(
        [this](Replicate change, Payload payload, std::function<void(const Status&)> done) {
          in_flight.emplace_back(std::move(change),
                                 std::vector<uint8_t>(payload.data, payload.data + payload.size));
          answers.push_back(std::move(done));
        },
        /*self=*/0);
  }
  // The backup takes the oldest change in flight and its answer goes back.
  void Deliver() {
    REQUIRE_FALSE(in_flight.empty());
    auto [change, bytes] = std::move(in_flight.front());
    in_flight.pop_front();
    auto answer = std::move(answers.front());
    answers.pop_front();
    Buffer payload = CopyOf(bytes.data(), bytes.size());
    Status got;
    backup->TakeReplica(0, change, std::move(payload), [&got](MessageBody body, Payload) {
      if (auto* e = std::get_if<ErrorReply>(&body)) got = Internal(e->message);
    });
    answer(got);
  }
  void DeliverAll() {
    while (!in_flight.empty()) Deliver();
  }
  PsShard::Reply Note(std::string what) {
    return [this, what](MessageBody body, Payload) {
      if (auto* e = std::get_if<ErrorReply>(&body))
        return replies.push_back(what + ": " + e->message);
      replies.push_back(what);
    };
  }
  void Init(std::vector<float> values) {
    Buffer b = CopyOf(values.data(), values.size() * sizeof(float));
    primary->Push(PushRequest{"w", 0, 0, 0, PushKind::kInit}, std::move(b), Note("init"));
  }
  void Push(int worker, int64_t step, std::vector<float> grad) {
    Buffer b = CopyOf(grad.data(), grad.size() * sizeof(float));
    primary->Push(PushRequest{"w", 0, worker, step, PushKind::kGradient}, std::move(b),
                  Note("push " + std::to_string(worker) + "@" + std::to_string(step)));
  }
  // The digests of the primary's own copies and of the backup's.
  std::pair<uint64_t, uint64_t> Digests() {
    uint64_t own = 0, copies = 0;
    primary->Digests([&](std::vector<PsShard::CopyDigest> d) {
      for (auto& c : d) own += c.primary < 0 ? c.digest : 0;
    });
    backup->Digests([&](std::vector<PsShard::CopyDigest> d) {
      for (auto& c : d) copies += c.primary == 0 ? c.digest : 0;
    });
    return {own, copies};
  }
};

TEST_CASE("sync: the step's acks and the pulls wait for the backup, whose copy stays equal") {
  Pair pair(UpdateMode::kSync);
  pair.Init({1, 2, 3, 4});
  CHECK(pair.replies.empty());  // the state is on its way
  pair.Deliver();
  CHECK(pair.replies == std::vector<std::string>{"init"});
  for (int64_t step = 0; step < 3; ++step) {
    pair.replies.clear();
    pair.Push(0, step, {0.1f, -0.2f, 0.3f, float(step)});
    pair.primary->Pull(PullRequest{"w", 0, 0, step + 1, 4}, pair.Note("pull"));
    CHECK(pair.replies.empty());  // gathered: no ack before the step is applied
    pair.Push(1, step, {0.5f, 0.25f, -1.0f, 2.0f});
    CHECK(pair.replies.empty());  // applied, not yet held by the backup
    CHECK(pair.in_flight.size() == 1);
    pair.Deliver();
    CHECK(pair.replies == std::vector<std::string>{"push 0@" + std::to_string(step),
                                                   "push 1@" + std::to_string(step), "pull"});
    auto [own, copies] = pair.Digests();
    CHECK(own == copies);
  }
  // Worker 0 sends step 2 again (its primary applied it, then died before
  // answering): acknowledged once the backups hold everything, not applied.
  auto before = pair.Digests().first;
  pair.replies.clear();
  pair.Push(0, 2, {9, 9, 9, 9});
  CHECK(pair.replies == std::vector<std::string>{"push 0@2"});
  CHECK(pair.Digests().first == before);
  CHECK(pair.in_flight.empty());
  // An older step is refused as before.
  pair.Push(0, 0, {9, 9, 9, 9});
  CHECK(pair.replies.back().find("push 0@0: ") == 0);
}

TEST_CASE("async and ssp: every push is replicated in order, and the copy stays equal") {
  for (UpdateMode mode : {UpdateMode::kAsync, UpdateMode::kSsp}) {
    Pair pair(mode, "{type: momentum, lr: 0.1, momentum: 0.9}");
    pair.Init({1, 1, 1});
    pair.DeliverAll();
    for (int64_t step = 0; step < 4; ++step)
      for (int w = 0; w < 2; ++w) pair.Push(w, step, {float(w), 0.5f, float(step)});
    CHECK(pair.in_flight.size() == 8);
    CHECK(pair.replies.size() == 1);  // only the init's ack
    pair.Deliver();
    CHECK(pair.replies.size() == 2);  // acks come as their updates are held
    pair.DeliverAll();
    CHECK(pair.replies.size() == 9);
    auto [own, copies] = pair.Digests();
    CHECK(own == copies);
    // Worker 1's push of step 3 again, after its lost primary applied it:
    // acknowledged, not applied twice; its push of step 4 is new.
    pair.Push(1, 3, {5, 5, 5});
    CHECK(pair.replies.size() == 10);
    CHECK(pair.in_flight.empty());
    CHECK(pair.Digests().first == own);
    pair.Push(1, 4, {5, 5, 5});
    CHECK(pair.in_flight.size() == 1);
  }
}

TEST_CASE("a backup refuses an update out of order, of another size, or before the state") {
  Config config = testing::Parse("train: {mode: sync}");
  auto inline_run = [](std::function<void()> fn) { fn(); };
  PsShard backup(&config, 2, MakeLogger("backup"), inline_run);
  std::string error;
  auto note = [&error](MessageBody body, Payload) {
    error = std::holds_alternative<ErrorReply>(body) ? std::get<ErrorReply>(body).message : "";
  };
  std::vector<float> update{1, 2};
  backup.TakeReplica(0, Replicate{"w", 0, ReplicaKind::kUpdate, -1, 1}, CopyOf(update.data(), 8),
                     note);
  CHECK(error.find("no state of it came before") != std::string::npos);
  backup.TakeReplica(0, Replicate{"w", 0, ReplicaKind::kState, -1, 1}, CopyOf(update.data(), 8),
                     note);
  CHECK(error.find("change 1 of the backup of 'w' partition 0") != std::string::npos);
}

TEST_CASE("train.replication: replicas 0 to 8, not with an elastic job or max_rows on disk") {
  CHECK(testing::Parse("train: {replication: {replicas: 2}}").train.replication.replicas == 2);
  CHECK(testing::Parse("train: {}").train.replication.replicas == 0);
  CHECK(testing::ErrorOf("train: {replication: {replicas: 9}}").find("replicas") !=
        std::string::npos);
  CHECK(testing::ErrorOf("train: {replication: {copies: 1}}").find("copies") != std::string::npos);
  CHECK(testing::ErrorOf("train: {checkpoint: {dir: /tmp/x}, elastic: {workers: [1, 2]}, "
                         "replication: {replicas: 1}}")
            .find("does not work with train.elastic yet") != std::string::npos);
  CHECK(testing::Parse("train: {replication: {replicas: 1}}\n"
                       "parameters: [{match: emb, init_in_server: true}]")
            .train.replication.replicas == 1);
  CHECK(testing::Parse("train: {replication: {replicas: 1}}\n"
                       "parameters: [{match: emb, init_in_server: true, server_cache_rows: 10}]")
            .train.replication.replicas == 1);
  CHECK(testing::ErrorOf("train: {replication: {replicas: 1}}\n"
                         "parameters: [{match: emb, init_in_server: true, server_cache_rows: 10, "
                         "max_rows: 100}]")
            .find("a table with rows on disk and max_rows has no backups yet") !=
        std::string::npos);
}

}  // namespace
}  // namespace pstrain
