// Server steps 8 and 9 (roles/server/server.h): the workers of an elastic
// job change under it. A lost worker of a sync job: the scheduler has the
// step under way finished without it (roles/scheduler/lost_worker.cc) on
// every partition and table (roles/server/update_core.h: Lose,
// FinishWithout). A live change of workers (roles/scheduler/live_workers.cc):
// from its step, every partition and table counts the new set (Renumber),
// and each worker's connection speaks for its new rank.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "roles/server/server.h"
#include "roles/server/table_host.h"

namespace pstrain {

int Server::ChiefRank() const {
  int chief = 0;
  while (lost_workers_.count(chief)) ++chief;
  return chief;
}

void Server::OnLoseWorker(const Connection::Ptr& conn, uint64_t id, const LoseWorker& request) {
  if (!ready_) return conn->Reply(id, ErrorReply{"this server holds no partitions yet"});
  lost_workers_.insert(request.rank);
  struct Gather {
    Mutex mutex;
    int64_t last GUARDED_BY(mutex) = -1;
  };
  auto gather = std::make_shared<Gather>();
  std::vector<PsShard*> shards = AllShards();
  const int64_t asked = request.last_step;
  auto parts = std::make_shared<CountDown>(shards.size() + (tables_ ? 1 : 0),
                                           [this, conn, id, gather, asked](const Status& st) {
                                             node_.loop().Post([conn, id, gather, asked, st] {
                                               if (conn->closed()) return;
                                               if (!st.ok())
                                                 return conn->Reply(id, ErrorReply{st.message()});
                                               if (asked >= 0) return conn->Reply(id, Ack{});
                                               MutexLock lock(&gather->mutex);
                                               conn->Reply(id, LoseWorkerReply{gather->last});
                                             });
                                           });
  auto done = [gather, parts](StatusOr<int64_t> last) {
    if (last.ok()) {
      MutexLock lock(&gather->mutex);
      gather->last = std::max(gather->last, *last);
    }
    parts->Report(last.status());
  };
  if (asked < 0) {
    node_.log()->warn("worker {} was lost: its pushes are refused from now on", request.rank);
  } else {
    node_.log()->warn("worker {} was lost: step {} finishes without it, later steps are called off",
                      request.rank, asked + 1);
  }
  for (PsShard* shard : shards) shard->LoseWorker(request.rank, asked, request.reason, done);
  if (tables_) tables_->LoseWorker(request.rank, asked, request.reason, done);
}

void Server::OnChangeWorkers(const Connection::Ptr& conn, uint64_t id,
                             const ChangeWorkers& change) {
  if (!ready_) return conn->Reply(id, ErrorReply{"this server holds no partitions yet"});
  // Every worker is at the change's step: nothing of theirs is in flight.
  for (auto it = worker_of_.begin(); it != worker_of_.end();) {
    const int was = it->second;
    const int now =
        was < static_cast<int>(change.ranks.size()) ? change.ranks[static_cast<size_t>(was)] : -1;
    if (now < 0) {
      it = worker_of_.erase(it);  // it left: its connection closes
    } else {
      (it++)->second = now;
    }
  }
  lost_workers_.clear();
  std::vector<PsShard*> shards = AllShards();
  auto parts = std::make_shared<CountDown>(shards.size() + (tables_ ? 1 : 0),
                                           [this, conn, id](const Status& st) {
                                             node_.loop().Post([conn, id, st] {
                                               if (conn->closed()) return;
                                               if (!st.ok())
                                                 return conn->Reply(id, ErrorReply{st.message()});
                                               conn->Reply(id, Ack{});
                                             });
                                           });
  node_.log()->info("the job runs with {} workers from step {} (workers of today take ranks {})",
                    change.workers, change.step, fmt::join(change.ranks, ","));
  for (PsShard* shard : shards)
    shard->ChangeWorkers(change.step, change.ranks, change.workers,
                         [parts](const Status& st) { parts->Report(st); });
  if (tables_)
    tables_->ChangeWorkers(change.step, change.ranks, change.workers,
                           [parts](const Status& st) { parts->Report(st); });
}

}  // namespace pstrain
