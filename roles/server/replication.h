// Replicated partitions (train.replication.replicas K): every dense
// partition a server holds, its primary copy, has a backup copy on each of
// the K servers after it (ranks wrapping), so that a lost server does not
// lose the updates the workers were told were taken.
//
// Replication after aggregation. A backup copy is not sent the workers'
// pushes: it is sent what its primary's optimizer was given, once per
// update, and applies it the same way (PsPartition::Replay), which gives
// the same values and optimizer state bit for bit:
//   1. The primary creates or restores a partition (the chief's Init, a
//      checkpoint): Replicate(kind State) + its whole state
//      (roles/server/handoff_codec.h) to every backup, which installs it.
//   2. The primary applies an update (a sync step's average, or one
//      async or ssp push): Replicate(kind Update, worker, seq) + the f32
//      vector the optimizer was given, to every backup. seq numbers the
//      partition's changes 1, 2, ...; a backup takes them only in order.
//   3. Every backup answers Ack once it holds the change. Until all have,
//      the primary holds back what would tell a worker the update is in:
//      the Ack of each push it carries (in sync, those of every worker of
//      the step) and every pull that comes meanwhile (ReplicationQueue).
//      A worker is told its push is in only once the backups hold it, and
//      a sync worker never sees values a backup does not hold.
// A change a backup refuses, or a link to it that fails, fails what waits
// for it and every later change of the partition: the job then goes back
// to its checkpoint, as it does for a lost server.
//
// Links: a server dials its backups once the job starts and says Hello as
// a server (roles/node/peers.h lists every server to every other when K > 0).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "comm/transport/buffer.h"
#include "comm/transport/connection.h"
#include "comm/transport/event_loop.h"
#include "comm/transport/messages.h"
#include "roles/checkpoint/shard_file.h"
#include "roles/node/server_view.h"
#include "src/common/logging.h"
#include "src/common/status.h"

namespace pstrain {

// A fingerprint of a copy of a partition: its name, values, optimizer
// state and counts. Copies that agree bit for bit have the same one; a sum
// of them fingerprints a set of copies whatever their order.
uint64_t ReplicaDigest(const PartitionSnapshot& s);

// Sends one change of a partition to every backup; `done` gets OK once all
// of them hold it, or the first error. Callable from any thread; `done`
// runs on any thread.
using ReplicaSender =
    std::function<void(Replicate change, Payload payload, std::function<void(const Status&)> done)>;

// A primary partition's changes on their way to its backups, and what waits
// for them. Owned by the partition's thread, like the partition.
class ReplicationQueue {
 public:
  using Then = std::function<void(const Status&)>;
  // Numbers a change about to be sent.
  int64_t Next() { return ++sent_; }
  // Changes numbered so far.
  int64_t sent() const { return sent_; }
  // Every change sent is held by every backup.
  bool caught_up() const { return acked_ == sent_ && failed_.ok(); }
  // Runs `then` once every change sent so far is held by every backup
  // (at once if it is), with the error if one failed.
  void AfterSent(Then then);
  // Sync: a push gathered for a step not applied yet; `then` runs with
  // the step's change (HoldStep moves it there).
  void HoldForStep(Then then) { step_.push_back(std::move(then)); }
  // The step's change was just numbered: what HoldForStep kept waits for it.
  void StepSent();
  // The step's change could not be made: what HoldForStep kept fails with
  // `why` now.
  void FailStep(const Status& why);
  // Change `seq` is held by every backup (or failed: then every change
  // after it fails too). Runs what waited for it, in order.
  void Acked(int64_t seq, const Status& status);

 private:
  int64_t sent_ = 0, acked_ = 0;
  Status failed_;
  std::deque<std::pair<int64_t, Then>> waiting_;  // by increasing seq
  std::vector<Then> step_;
};

// How a backup refuses an update of a copy it does not hold (it dropped it
// when a new view said it no longer backs that primary up, which the
// primary may not have heard yet): the primary then waits for the states
// of its new view, as for a link that closed.
inline constexpr const char* kNoCopy = "no state of it came before";

// A server's links to the servers backing up its partitions.
class BackupLinks {
 public:
  explicit BackupLinks(EventLoop* loop) : loop_(loop) {}
  // Links to exactly `backups`: keeps the links to those already linked,
  // closes the others, and dials the rest, saying `hello`; blocks until
  // all answered.
  Status Connect(const Logger& log, const Hello& hello, const std::vector<NodeInfo>& backups,
                 int servers);
  // A ReplicaSender over these links. A change no backup is linked for is
  // held at once (a job whose other servers are all lost goes on). One
  // whose link closes never completes: what waits for it waits for the
  // states every partition sends again once the scheduler names the new
  // backups (roles/server/server_replication.cc). Nor does an update over a
  // link that has not carried the partition's state yet (a new backup, or
  // a partition this server took over): it is not sent there, and the
  // state that follows stands in for it.
  void Send(Replicate change, Payload payload, std::function<void(const Status&)> done);
  // Called on the loop thread, once per link, when a change finds the link
  // to backup `rank` closed. Set before the first Send.
  void OnClosed(std::function<void(int rank, const Status& why)> closed) {
    on_closed_ = std::move(closed);
  }
  // Changes and payload bytes sent to backups (one count per backup).
  int64_t changes_sent() const { return changes_.load(); }
  int64_t bytes_sent() const { return bytes_.load(); }

 private:
  struct Link {
    Connection::Ptr conn;
    // A partition (false, tensor, part) or a table's share (true, table,
    // origin): what was sent whole over this link.
    using Key = std::tuple<bool, std::string, int64_t>;
    std::set<Key> has_state;
    bool closed_told = false;  // OnClosed's hook heard of it
  };
  void TellClosed(int rank, const Connection* conn, const Status& why);
  std::function<void(int, const Status&)> on_closed_;
  static Link::Key KeyOf(const Replicate& change);
  EventLoop* loop_;
  std::map<int, Link> links_;  // by server rank; loop thread
  std::atomic<int64_t> changes_{0};
  std::atomic<int64_t> bytes_{0};
};

}  // namespace pstrain
