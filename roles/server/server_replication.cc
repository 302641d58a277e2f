// The server's links for replication (roles/server/replication.h): the
// servers it backs up dial it; it dials the servers that back it up.
#include <fmt/format.h>

#include <map>

#include "comm/transport/completion.h"
#include "roles/node/peers.h"
#include "roles/server/server.h"
#include "src/common/mutex.h"

namespace pstrain {

std::string Server::ServerHelloRefusal(const NodeInfo& who) {
  const int servers = node_.cluster().server_num();
  const int replicas = config_.train.replication.replicas;
  if (replicas == 0) return "only workers connect to a server of a job without train.replication";
  if (who.rank < 0 || who.rank >= servers)
    return fmt::format("server rank {} is outside the job's 0..{}", who.rank, servers - 1);
  for (int primary : PrimariesBackedUpBy(node_.cluster().rank(), servers, replicas))
    if (primary == who.rank) return "";
  return fmt::format("server {} does not back up server {}'s partitions", node_.cluster().rank(),
                     who.rank);
}

void Server::OnReplicate(const Connection::Ptr& conn, uint64_t id, Replicate& change,
                         Buffer payload) {
  auto it = primary_of_.find(conn.get());
  if (it == primary_of_.end()) {
    node_.log()->warn("refused Replicate from {}: not a server this one backs up", conn->peer());
    return conn->Reply(id, ErrorReply{"Replicate from a connection that is not a server's whose "
                                      "partitions this one backs up (Hello first)"});
  }
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

Status Server::ConnectBackups(const Topology& topology) {
  if (!backup_links_) return Status::OK();
  const int servers = node_.cluster().server_num();
  std::vector<NodeInfo> backups;
  for (int rank : BackupsOf(rank(), servers, config_.train.replication.replicas))
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

}  // namespace pstrain
