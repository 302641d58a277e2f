// Replicated server-held tables (roles/server/table_replication.cc): a
// primary TableHost wired by hand to a backup's copy keeps that copy the
// same bit for bit (rows created by pulls, optimizer slots, counts), in
// async and sync; a push is acknowledged only once the backup holds its
// update; a push resent to the promoted copy after its update was applied
// is acknowledged and not applied again; a copy promoted without its state
// refuses requests; a backup refuses changes out of order or before the
// state; the change codec refuses what is not whole.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "roles/placement/server_tables.h"
#include "roles/server/table_replica_codec.h"
#include "tests/table_host_util.h"

namespace pstrain {
namespace {

using Host = testing::TableHostFixture;
using testing::BytesOf;
using testing::StatusOfReply;

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> ids;
  for (int64_t id = from; id < to; ++id) ids.push_back(id);
  return ids;
}

// A primary's link to its backup: each change goes to the backup's
// TakeReplica; while `hold` is set, the backup's answers wait for Release.
class Wire {
 public:
  explicit Wire(Host* backup) : backup_(backup) {}
  ReplicaSender Sender() {
    return [this](Replicate change, Payload payload, std::function<void(const Status&)> done) {
      (*backup_)->TakeReplica(change, BytesOf(payload.data, payload.size),
                              [this, done](MessageBody body, Payload) {
                                const Status st = StatusOfReply(body);
                                std::unique_lock<std::mutex> lock(mutex_);
                                if (hold_) return held_.push_back([done, st] { done(st); });
                                lock.unlock();
                                done(st);
                              });
    };
  }
  void Hold() {
    std::lock_guard<std::mutex> lock(mutex_);
    hold_ = true;
  }
  void Release() {
    std::vector<std::function<void()>> due;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      hold_ = false;
      due.swap(held_);
    }
    for (auto& answer : due) answer();
  }

 private:
  Host* backup_;
  std::mutex mutex_;
  bool hold_ = false;
  std::vector<std::function<void()>> held_;
};

// A copy promoted after its primary was lost sends to backups no one runs:
// each change is held at once.
ReplicaSender NoBackups() {
  return [](Replicate, Payload, std::function<void(const Status&)> done) { done(Status::OK()); };
}

void SendStates(Host& host) {
  Completion<Status> done;
  host->SendStates([done](const Status& st, int64_t, int64_t) { done.Set(st); });
  REQUIRE_MESSAGE(done.Wait().ok(), done.Wait().message());
}

bool SameRows(Host& a, Host& b) {
  const RowsDigestReply x = a.Digest(), y = b.Digest();
  return x.rows == y.rows && x.sums == y.sums;
}

Config TableConfig(UpdateMode mode) {
  Config config = OneTableConfig("emb", Host::kDim);
  config.train.mode = mode;
  config.parameters[0].optimizer = OptimizerConfig{};
  config.parameters[0].optimizer->type = OptimizerType::kAdam;
  return config;
}

// A primary of 2 workers wired to its backup, and a third host that takes
// the same requests unreplicated.
struct Replicated {
  explicit Replicated(UpdateMode mode)
      : config(TableConfig(mode)),
        primary(config, 0, 1, sink, 2),
        backup(config, 0, 1, sink, 2),
        alone(config, 0, 1, sink, 2),
        wire(&backup) {
    primary->ReplicateTo(wire.Sender());
    SendStates(primary);
  }
  std::shared_ptr<testing::CaptureSink> sink = std::make_shared<testing::CaptureSink>();
  Config config;
  Host primary, backup, alone;
  Wire wire;
};

TEST_CASE("a backup's copy of a table is its primary's, bit for bit, and the primary unchanged") {
  for (UpdateMode mode : {UpdateMode::kAsync, UpdateMode::kSync}) {
    CAPTURE(static_cast<int>(mode));
    Replicated job(mode);
    Host &primary = job.primary, &backup = job.backup, &alone = job.alone;
    for (int64_t step = 0; step < 6; ++step) {
      for (Host* h : {&primary, &alone}) {
        // Each worker pulls rows (new ones are created) and pushes them.
        h->Pull(Range(step * 10, step * 10 + 40), 0);
        h->Pull(Range(step * 7, step * 7 + 30), 1);
        Completion<Status> a, b;
        h->PushAsync(Range(step * 10, step * 10 + 40), step, 0, a);
        h->PushAsync(Range(step * 7, step * 7 + 30), step, 1, b);
        REQUIRE_MESSAGE(a.Wait().ok(), a.Wait().message());
        REQUIRE_MESSAGE(b.Wait().ok(), b.Wait().message());
      }
    }
    CHECK(primary.Digest().rows[0] == 90);
    CHECK(SameRows(primary, backup));
    CHECK(SameRows(primary, alone));  // replicating changes nothing it computes
  }
}

// Rows past a budget of 16 go to disk, in `store`.
Config TieredConfig(const testing::TempDir& store) {
  Config config = TableConfig(UpdateMode::kAsync);
  config.parameters[0].server_cache_rows = 16;
  config.train.store_dir = store.path();
  return config;
}

// Rows 0..n pulled and pushed by worker 0 at clocks from `clock`.
void Train(Host& h, int64_t from, int64_t to, int64_t clock) {
  for (int64_t id = from; id < to; id += 20, ++clock) {
    h.Pull(Range(id, id + 20));
    h.Push(Range(id, id + 20), clock);
  }
}

// A primary and its backup-to-be of a tiered table, the primary trained on
// `rows` rows first (most of them on disk).
struct TieredPair {
  explicit TieredPair(int64_t rows)
      : config(TieredConfig(store)), primary(config, 0, 1, sink, 1), backup(config, 0, 1, sink, 1) {
    Train(primary, 0, rows, 0);
  }
  std::shared_ptr<testing::CaptureSink> sink = std::make_shared<testing::CaptureSink>();
  testing::TempDir store;
  Config config;
  Host primary, backup;
};

TEST_CASE("a tiered table's backup gets its rows on disk after its state, and stays the same") {
  // Most rows on disk before the backup is linked: its state is the rows in
  // memory, then those on disk.
  TieredPair pair(200);
  Host &primary = pair.primary, &backup = pair.backup;
  Wire wire(&backup);
  primary->ReplicateTo(wire.Sender());
  SendStates(primary);
  CHECK(backup.Digest().rows[0] == 200);
  CHECK(SameRows(primary, backup));
  // Changes after it reach rows on disk on both (read back, spilled again).
  Train(primary, 100, 300, 10);
  CHECK(SameRows(primary, backup));
  // A state sent again (a new view) makes the copy anew, in its store.
  SendStates(primary);
  Train(primary, 0, 60, 20);
  CHECK(primary.Digest().rows[0] == 300);
  CHECK(SameRows(primary, backup));
  // Promoted, the copy answers from its rows on disk too.
  primary->ReplicateTo(NoBackups());
  backup->Promote(NoBackups());
  Train(backup, 250, 300, 30);
  Train(primary, 250, 300, 30);
  CHECK(SameRows(primary, backup));
}

TEST_CASE("a tiered copy is not whole until its rows on disk came") {
  TieredPair pair(100);
  Host &primary = pair.primary, &backup = pair.backup;
  // Only the state reaches the backup: the rows on disk are lost on the way.
  primary->ReplicateTo(
      [&backup](Replicate change, Payload payload, std::function<void(const Status&)> done) {
        if (change.kind == ReplicaKind::kTableRows) return done(Status::OK());
        backup->TakeReplica(change, BytesOf(payload.data, payload.size),
                            [done](MessageBody body, Payload) { done(StatusOfReply(body)); });
      });
  SendStates(primary);
  // The next change is refused (one is missing), and the copy, promoted,
  // refuses every request, naming why.
  Completion<Status> pushed;
  primary.PushAsync(Range(0, 4), 9, 0, pushed);
  CHECK(pushed.Wait().message().find("the copy holds change 1") != std::string::npos);
  backup->Promote(NoBackups());
  Completion<Status> refused;
  backup.PushAsync(Range(0, 4), 9, 0, refused);
  CHECK(refused.Wait().message().find("rows on disk had not come") != std::string::npos);
}

TEST_CASE("a table push is acknowledged only once the backup holds its update") {
  auto sink = std::make_shared<testing::CaptureSink>();
  const Config config = TableConfig(UpdateMode::kSync);
  Host primary(config, 0, 1, sink, 2), backup(config, 0, 1, sink, 2);
  Wire wire(&backup);
  primary->ReplicateTo(wire.Sender());
  SendStates(primary);
  wire.Hold();
  Completion<Status> first, second;
  primary.PushAsync(Range(0, 20), 0, 0, first);
  primary.PushAsync(Range(10, 30), 0, 1, second);  // the step is complete: applied, sent
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(first.IsSet());
  CHECK_FALSE(second.IsSet());
  wire.Release();
  CHECK(first.Wait().ok());
  CHECK(second.Wait().ok());
  CHECK(SameRows(primary, backup));
}

TEST_CASE("a push resent to the promoted copy after its update was applied is applied once") {
  for (UpdateMode mode : {UpdateMode::kAsync, UpdateMode::kSync}) {
    CAPTURE(static_cast<int>(mode));
    Replicated job(mode);
    Host &primary = job.primary, &backup = job.backup, &reference = job.alone;
    for (Host* h : {&primary, &reference}) {
      h->Pull(Range(0, 30));
      Completion<Status> a, b;
      h->PushAsync(Range(0, 20), 0, 0, a);
      h->PushAsync(Range(10, 30), 0, 1, b);
      REQUIRE(a.Wait().ok());
      REQUIRE(b.Wait().ok());
    }
    // The primary dies before worker 1 hears of its push: the worker sends
    // it again to the copy, now primary.
    backup->Promote(NoBackups());
    // Sent again whole, it is acknowledged; cut short, it is refused.
    Completion<Status> cut;
    backup->Push(SparsePushRequest{Host::kTable, 1, 0, 20, 1}, BytesOf("short", 5),
                 [cut](MessageBody body, Payload) { cut.Set(StatusOfReply(body)); });
    CHECK(cut.Wait().message().find("expected 24 bytes per row") != std::string::npos);
    backup.Push(Range(10, 30), 0, 1);
    CHECK(SameRows(backup, reference));
    // And the job goes on there as it would have.
    for (Host* h : {&backup, &reference}) {
      Completion<Status> a, b;
      h->PushAsync(Range(5, 25), 1, 0, a);
      h->PushAsync(Range(0, 10), 1, 1, b);
      REQUIRE_MESSAGE(a.Wait().ok(), a.Wait().message());
      REQUIRE_MESSAGE(b.Wait().ok(), b.Wait().message());
    }
    CHECK(SameRows(backup, reference));
  }
}

TEST_CASE("a copy promoted before its state came refuses every request, naming why") {
  auto sink = std::make_shared<testing::CaptureSink>();
  Host copy(TableConfig(UpdateMode::kAsync), 2, 1, sink, 1);
  copy->Promote(NoBackups());
  Completion<Status> pushed;
  copy.PushAsync(Range(0, 4), 0, 0, pushed);
  CHECK(pushed.Wait().message().find("the rows of server 2's table 'emb.weight' are lost") !=
        std::string::npos);
  CHECK(pushed.Wait().message().find("its state had not come") != std::string::npos);
}

StatusOr<MessageBody> Take(Host& backup, Replicate change, const std::vector<uint8_t>& bytes) {
  Completion<MessageBody> done;
  backup->TakeReplica(std::move(change), BytesOf(bytes.data(), bytes.size()),
                      [done](MessageBody body, Payload) { done.Set(std::move(body)); });
  return done.Wait();
}

std::string ErrorOf(const StatusOr<MessageBody>& body) { return StatusOfReply(*body).message(); }

TEST_CASE("a table's backup refuses a change before the state, out of order, or not whole") {
  auto sink = std::make_shared<testing::CaptureSink>();
  const Config config = TableConfig(UpdateMode::kAsync);
  Host backup(config, 0, 1, sink, 1);
  const std::vector<int64_t> ids = Range(0, 3);
  const std::vector<float> grads(ids.size() * Host::kDim, 0.5f);
  const auto apply =
      EncodeTableChange(TableOp::kApply, 0, ids.data(), ids.size(), grads.data(), Host::kDim);
  const Replicate op{Host::kTable, 0, ReplicaKind::kTableOps, 0, 1, 0};
  CHECK(ErrorOf(Take(backup, op, apply)).find(kNoCopy) != std::string::npos);
  UpdateCore core(1, UpdateMode::kAsync);
  auto empty = ServerRows::Create(ServerTables(config)->at(0), nullptr);
  REQUIRE(empty.ok());
  std::string rows;
  empty->Serialize(&rows);
  const auto state = EncodeTableState(core.Save(), rows);
  CHECK(
      ErrorOf(Take(backup, {Host::kTable, 0, ReplicaKind::kTableState, -1, 1, 0}, state)).empty());
  Replicate skipped = op;
  skipped.seq = 3;
  CHECK(ErrorOf(Take(backup, skipped, apply)).find("the copy holds change 1") != std::string::npos);
  std::vector<uint8_t> cut(apply.begin(), apply.end() - 1);
  Replicate next = op;
  next.seq = 2;
  CHECK(ErrorOf(Take(backup, next, cut)).find("bytes for 3 ids") != std::string::npos);
  Replicate unknown = next;
  unknown.tensor = "other.weight";
  CHECK(ErrorOf(Take(backup, unknown, apply)).find("no such server-held table") !=
        std::string::npos);
  CHECK(ErrorOf(Take(backup, next, apply)).empty());
  // The codecs: a change of an unknown operation, or a state of another format.
  std::vector<uint8_t> bad_op = apply;
  bad_op[0] = 7;
  CHECK_FALSE(DecodeTableChange(bad_op.data(), bad_op.size(), "t", Host::kDim, 100).ok());
  CHECK_FALSE(DecodeTableChange(apply.data(), apply.size(), "t", Host::kDim, 2).ok());
  std::vector<uint8_t> bad_state = state;
  bad_state[4] = 9;
  CHECK(DecodeTableState(bad_state.data(), bad_state.size(), "t")
            .status()
            .message()
            .find("format 9") != std::string::npos);
}

}  // namespace
}  // namespace pstrain
