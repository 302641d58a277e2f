// The server's links for replication (roles/server/replication.h): the
// servers it backs up dial it; it dials the servers that back it up.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "comm/transport/completion.h"
#include "comm/transport/timer.h"
#include "roles/node/peers.h"
#include "roles/server/server.h"
#include "roles/server/table_host.h"
#include "src/common/mutex.h"

namespace pstrain {

// Any server of the job may: a primary of a view this one has not heard
// of yet dials it before the view comes here.
std::string Server::ServerHelloRefusal(const NodeInfo& who) {
  const int servers = node_.cluster().server_num();
  if (config_.train.replication.replicas == 0)
    return "only workers connect to a server of a job without train.replication";
  if (who.rank < 0 || who.rank >= servers || who.rank == rank())
    return fmt::format("server rank {} is not another of the job's 0..{}", who.rank, servers - 1);
  return "";
}

void Server::OnReplicate(const Connection::Ptr& conn, uint64_t id, Replicate& change,
                         Buffer payload) {
  auto it = primary_of_.find(conn.get());
  if (it == primary_of_.end()) {
    node_.log()->warn("refused Replicate from {}: not a server this one backs up", conn->peer());
    return conn->Reply(id, ErrorReply{"Replicate from a connection that is not a server's whose "
                                      "partitions this one backs up (Hello first)"});
  }
  // A server the view counts as lost (one stopped that woke, still holding
  // what its heir took over) changes no copy.
  if (!std::binary_search(view_.live.begin(), view_.live.end(), it->second))
    return conn->Reply(
        id, ErrorReply{fmt::format("server {} is lost in view {}: its heir holds its partitions",
                                   it->second, view_.view)});
  if (IsTableReplica(change.kind))
    return OnTableReplica(conn, id, it->second, change, std::move(payload));
  const int64_t largest = config_.train.partition_bytes;
  if (change.kind == ReplicaKind::kUpdate && static_cast<int64_t>(payload.size) > largest)
    return conn->Reply(id,
                       ErrorReply{fmt::format("an update of {} bytes to the backup of '{}' "
                                              "partition {}: partitions hold at most {} bytes",
                                              payload.size, change.tensor, change.part, largest)});
  PsShard* shard = ShardFor(change.tensor, change.part, static_cast<int64_t>(payload.size));
  if (shard == nullptr) return RefuseNewPartition(conn, id, change.tensor, change.part);
  shard->TakeReplica(it->second, std::move(change), std::move(payload), ReplyTo(conn, id));
}

void Server::OnTableReplica(const Connection::Ptr& conn, uint64_t id, int primary,
                            Replicate& change, Buffer payload) {
  const int origin = change.origin;
  const int servers = node_.cluster().server_num();
  if (origin < 0 || origin >= servers)
    return conn->Reply(id, ErrorReply{fmt::format("a table change of server {}'s rows, in a job "
                                                  "of {} servers",
                                                  origin, servers)});
  auto found = table_copies_.find(origin);
  if (change.kind == ReplicaKind::kTableState &&
      (found == table_copies_.end() || found->second.primary != primary)) {
    // The first state, or a new primary's (its heir's): it replaces the copy.
    // Its rows beyond a memory budget go to a store of its own, removed
    // with it (the copy it replaces may not be gone yet: a new name each).
    auto host = TableHost::Create(
        config_, node_.cluster().worker_num(), origin, servers, node_.log(),
        fmt::format("{}.copy-on-server-{}-from-server-{}.{}", ServerStoreDir(config_, origin),
                    rank(), primary, ++copies_made_));
    if (!host.ok()) return conn->Reply(id, ErrorReply{host.status().message()});
    if (found != table_copies_.end()) DropTables(std::move(found->second.host));
    found = table_copies_.insert_or_assign(origin, TableCopy{primary, std::move(*host)}).first;
  }
  if (found == table_copies_.end())
    return conn->Reply(id, ErrorReply{fmt::format("change {} of server {}'s table '{}': {}",
                                                  change.seq, origin, change.tensor, kNoCopy)});
  TableCopy& copy = found->second;
  if (copy.primary != primary)
    return conn->Reply(
        id, ErrorReply{fmt::format("change {} of server {}'s table '{}' came from server {}, the "
                                   "copy from server {}",
                                   change.seq, origin, change.tensor, primary, copy.primary)});
  copy.host->TakeReplica(std::move(change), std::move(payload), ReplyTo(conn, id));
}

void Server::DropTables(std::shared_ptr<TableHost> host) {
  // Off the loop: a host joins its thread, which first makes what it holds.
  if (!host) return;
  replica_thread_.Post([host = std::move(host)]() mutable { host.reset(); });
}

ReplicaSender Server::ToBackups() {
  BackupLinks* links = backup_links_.get();
  return [links](Replicate change, Payload payload, std::function<void(const Status&)> done) {
    links->Send(std::move(change), std::move(payload), std::move(done));
  };
}

bool Server::OwnsOwnTables() {
  if (!backup_links_) return true;
  // A server that joined again as a backup made its tables empty: its
  // rank's rows are wherever the view says, as a copy taken over there
  // (here too, once this server is the heir of the one holding them).
  const auto self = static_cast<size_t>(rank());
  return !node_.cluster().joined_live() && self < view_.owners.size() &&
         view_.owners[self] == static_cast<int>(self);
}

TableHost* Server::TablesOf(int origin) {
  if (origin < 0) origin = rank();
  if (auto it = taken_tables_.find(origin); it != taken_tables_.end()) return it->second.get();
  return origin == rank() && OwnsOwnTables() ? tables_.get() : nullptr;
}

std::vector<TableHost*> Server::PrimaryTables() {
  std::vector<TableHost*> out;
  if (tables_ && OwnsOwnTables()) out.push_back(tables_.get());
  for (auto& [origin, host] : taken_tables_) out.push_back(host.get());
  return out;
}

void Server::RefuseTables(const Connection::Ptr& conn, uint64_t id, int origin) {
  if (!tables_) return conn->Reply(id, ErrorReply{"this server holds no embedding tables yet"});
  conn->Reply(id, ErrorReply{fmt::format("server {} holds no table rows of server {} (view {})",
                                         rank(), origin, view_.view)});
}

void Server::ApplyTableView(const ServerView& view, const std::vector<int>& primaries) {
  auto live = [&view](int r) { return std::binary_search(view.live.begin(), view.live.end(), r); };
  for (auto it = table_copies_.begin(); it != table_copies_.end();) {
    const int origin = it->first;
    const int primary = it->second.primary;
    if (!live(primary) && view.owners[static_cast<size_t>(origin)] == rank() &&
        TablesOf(origin) == nullptr) {
      // As a promoted partition (PsShard::ApplyView): its changes go to
      // the backups from now on, after its state (Rereplicate sends it). A
      // copy that is not whole refuses every request, naming why.
      it->second.host->Promote(ToBackups());
      taken_tables_[origin] = std::move(it->second.host);
      it = table_copies_.erase(it);
    } else if (!live(primary) ||
               std::find(primaries.begin(), primaries.end(), primary) == primaries.end()) {
      DropTables(std::move(it->second.host));  // as PsShard::ApplyView: it would go stale
      it = table_copies_.erase(it);
    } else {
      ++it;
    }
  }
}

void Server::MakeFence() {
  // Past the verdict's own deadlines: a doubt is answered within twice the
  // heartbeat timeout, or the scheduler's link closes and a rejoin has the
  // connect timeout.
  const ClusterOptions& cluster = node_.options().cluster;
  const double patience_s = cluster.connect_timeout_s + 2 * cluster.heartbeat_timeout_s;
  fence_ = std::make_unique<RequestFence>(
      &node_.loop(), [this] { return node_.cluster().CountedIn(); },
      [this](const Connection::Ptr& conn, Incoming&& in) { OnPeerRequest(conn, std::move(in)); },
      static_cast<uint64_t>(1000 * patience_s));
  node_.OnInterrupt([this](const Status& why) {
    const size_t waiting = fence_->waiting();
    if (waiting == 0) return;
    // Their workers send them where the next view says.
    fence_->Drop(Unavailable("this server's part in the job is over: " + why.message()));
    node_.log()->warn(
        "refused {} requests of workers that came while this server could not "
        "tell whether it was counted lost: {}",
        waiting, why.message());
  });
}

// A closed link's backup is most often lost, and the scheduler's new view
// (which re-replicates) comes within a round trip; a link cut while both
// servers live brings none. So the link is made again only if no view came
// within a second (at most half the heartbeat timeout): its changes wait
// for the states sent then.
void Server::OnBackupLinkClosed(int backup, const Status& why) {
  const ServerView view = view_;
  const double timeout_s = node_.options().cluster.heartbeat_timeout_s;
  const auto wait_ms = static_cast<uint64_t>(std::min(1000.0, 500.0 * timeout_s));
  RunAfter(&node_.loop(), wait_ms, [this, view, backup, why](bool fired) {
    if (!fired || stopping_.load() || view_.view != view.view) return;
    node_.log()->warn(
        "replication: the link to backup server {} closed ({}) while both servers are live "
        "(view {}): linking again and sending it every state",
        backup, why.message(), view.view);
    replica_thread_.Post([this, view] { Rereplicate(view); });
  });
}

// What a worker reads or writes waits while this server may have been
// counted lost; a backup's changes and the scheduler's messages do not.
bool Server::Fenced(const Connection::Ptr& conn, Incoming& in) {
  if (!fence_) return false;
  const MessageBody& body = in.message.body;
  if (!std::holds_alternative<PushRequest>(body) && !std::holds_alternative<PullRequest>(body) &&
      !std::holds_alternative<SparsePullRequest>(body) &&
      !std::holds_alternative<SparsePushRequest>(body) &&
      !std::holds_alternative<SaveRequest>(body))
    return false;
  return fence_->Hold(conn, in);
}

Status Server::ConnectBackups(const Topology& topology) {
  if (!backup_links_) return Status::OK();
  const int servers = node_.cluster().server_num();
  const std::vector<int> live =
      node_.loop().Call<std::vector<int>>([this] { return view_.live; }, {});
  std::vector<NodeInfo> backups;
  for (int rank : BackupsOf(rank(), live, config_.train.replication.replicas))
    for (const NodeInfo& n : topology.nodes)
      if (n.role == Role::kServer && n.rank == rank) backups.push_back(n);
  Hello hello;
  hello.node.node_id = node_.options().node_id;
  hello.node.role = Role::kServer;
  hello.node.rank = rank();
  hello.generation = node_.cluster().generation();
  PSTRAIN_RETURN_IF_ERROR(backup_links_->Connect(node_.log(), hello, backups, servers));
  std::string ranks;
  for (const NodeInfo& n : backups) ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ", n.rank);
  node_.log()->info("replication: server {}'s partitions are backed up on server {}", rank(),
                    ranks);
  return Status::OK();
}

void Server::OnServerView(const Connection::Ptr& conn, uint64_t id, const ServerView& view) {
  const int servers = node_.cluster().server_num();
  if (!backup_links_ || static_cast<int>(view.owners.size()) != servers)
    return conn->Reply(
        id, ErrorReply{fmt::format("a server view of {} servers, to a server of a job of {}{}",
                                   view.owners.size(), servers,
                                   backup_links_ ? "" : " without train.replication")});
  if (view.view <= view_.view) return conn->Reply(id, Ack{});  // already taken
  if (!ready_) {  // a server joining the running job: once its shards are made
    early_view_ = {conn, id, view};
    return;
  }
  view_ = view;
  newest_view_ = view.view;
  const int replicas = config_.train.replication.replicas;
  const bool heir = view.lost >= 0 && HeirOf(view.lost, view.live) == rank();
  // Posted before the Ack: a worker's request sent after the view reaches
  // the shard after the promotion.
  const std::vector<int> primaries = PrimariesBackedUpBy(rank(), view.live, replicas);
  for (PsShard* shard : AllShards()) shard->ApplyView(rank(), view, primaries);
  ApplyTableView(view, primaries);
  if (heir)
    node_.log()->warn(
        "replication: server {} was lost; this server holds its partitions now "
        "(view {})",
        view.lost, view.view);
  conn->Reply(id, Ack{});
  replica_thread_.Post([this, view] { Rereplicate(view); });
}

void Server::Rereplicate(const ServerView& view) {
  auto held = node_.cluster().Held();
  if (!held || newest_view_.load() != view.view) return;
  const auto start = std::chrono::steady_clock::now();
  if (Status st = ConnectBackups(*held); !st.ok()) {
    node_.log()->error("replication: view {}: {}", view.view, st.message());
    // Still this view's backup after a patient try: what this server holds
    // has no whole copy, and its acknowledgements would wait for ever. The
    // scheduler rolls the job back, or ends it, naming why.
    if (!stopping_.load() && newest_view_.load() == view.view)
      node_.cluster().ReportFailure(
          st.WithContext(
              fmt::format("server {} cannot reach its backups in view {}", rank(), view.view)),
          /*recoverable=*/true);
    return;
  }
  struct Sent {
    Mutex mutex;
    int64_t partitions GUARDED_BY(mutex) = 0;
    int64_t bytes GUARDED_BY(mutex) = 0;
  };
  auto sent = std::make_shared<Sent>();
  std::vector<PsShard*> shards = AllShards();
  const std::vector<TableHost*> tables =
      node_.loop().Call<std::vector<TableHost*>>([this] { return PrimaryTables(); }, {});
  Completion<Status> all;
  auto done = CountDown::Into(all, shards.size() + tables.size());
  auto count = [sent, done](const Status& st, int64_t parts, int64_t bytes) {
    {
      MutexLock lock(&sent->mutex);
      sent->partitions += parts;
      sent->bytes += bytes;
    }
    done->Report(st);
  };
  for (PsShard* shard : shards) shard->SendStates(count);
  for (TableHost* host : tables) host->SendStates(count);
  // Bounded: a server that stops while its backups are away does not wait.
  std::optional<Status> waited;
  // A newer view's states stand in for these: it goes on to that one.
  while (!stopping_.load() && newest_view_.load() == view.view &&
         !(waited = all.WaitFor(std::chrono::milliseconds(100)))) {
  }
  if (!waited) return;
  const Status st = *waited;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int replicas = config_.train.replication.replicas;
  const std::vector<int> backups = BackupsOf(rank(), view.live, replicas);
  MutexLock lock(&sent->mutex);
  if (!st.ok()) {
    node_.log()->error("replication: view {}: the partitions' states did not reach the backups: {}",
                       view.view, st.message());
  } else {
    node_.log()->info(
        "replication: view {}: server {}'s {} partitions and table shares ({} bytes) are on its "
        "{} backups again in {:.3f} s",
        view.view, rank(), sent->partitions, sent->bytes, backups.size(), seconds);
    node_.cluster().ReportReplicasHeld(view.view);
  }
  if (static_cast<int>(backups.size()) < replicas)
    node_.log()->warn(
        "replication: server {}'s partitions have {} backups of train.replication.replicas {} "
        "until more servers are live",
        rank(), backups.size(), replicas);
}

void Server::LogReplicas() {
  struct Sums {
    Mutex mutex;
    std::map<int, std::pair<int64_t, uint64_t>> by_primary GUARDED_BY(mutex);  // count, sum
  };
  auto sums = std::make_shared<Sums>();
  std::vector<PsShard*> shards = AllShards();
  Completion<Status> all;
  auto done = CountDown::Into(all, shards.size());
  for (PsShard* shard : shards)
    shard->Digests([sums, done](std::vector<PsShard::CopyDigest> digests) {
      {
        MutexLock lock(&sums->mutex);
        for (const PsShard::CopyDigest& d : digests) {
          auto& [count, sum] = sums->by_primary[d.primary];
          ++count;
          sum += d.digest;
        }
      }
      done->Report(Status::OK());
    });
  if (!all.WaitFor(std::chrono::seconds(30)).has_value()) return;
  LogTableReplicas();
  MutexLock lock(&sums->mutex);
  for (const auto& [primary, entry] : sums->by_primary) {
    const std::string whose = primary < 0 ? fmt::format("server {}'s own", rank())
                                          : fmt::format("backups of server {}'s", primary);
    node_.log()->info("replication: {} {} partitions, digest {:016x}", whose, entry.first,
                      entry.second);
  }
  if (backup_links_)
    node_.log()->info("replication: sent {} changes, {} bytes, to the backups",
                      backup_links_->changes_sent(), backup_links_->bytes_sent());
}

// One line per table share: a primary's and each backup's of the same rows
// agree when the backups hold every change.
void Server::LogTableReplicas() {
  struct Share {
    int origin;
    const char* role;
    TableHost* host;
    std::shared_ptr<TableHost> keep;  // a copy a view may drop meanwhile
  };
  const std::vector<Share> shares = node_.loop().Call<std::vector<Share>>(
      [this] {
        std::vector<Share> out;
        for (TableHost* host : PrimaryTables()) out.push_back({host->rank(), "primary", host, {}});
        for (auto& [origin, copy] : table_copies_)
          out.push_back({origin, "backup", copy.host.get(), copy.host});
        return out;
      },
      {});
  for (const Share& share : shares) {
    Completion<StatusOr<TableHost::NamedDigests>> digests;
    share.host->Digests(
        [digests](StatusOr<TableHost::NamedDigests> d) { digests.Set(std::move(d)); });
    auto got = digests.WaitFor(std::chrono::seconds(30));
    if (!got || !got->ok()) continue;
    for (const auto& [table, d] : **got)
      node_.log()->info(
          "replication: table '{}' of server {}'s rows ({}): {} rows, {} updates, digest {:016x}",
          table, share.origin, share.role, d.rows, d.updates, d.sum);
  }
}

}  // namespace pstrain
