#include "roles/server/replication.h"

#include <fmt/format.h>

#include <algorithm>

#include "comm/transport/completion.h"
#include "roles/node/server_links.h"
#include "src/common/fnv.h"

namespace pstrain {

uint64_t ReplicaDigest(const PartitionSnapshot& s) {
  uint64_t h = kFnvOffset;
  h = Fnv(h, s.tensor.data(), s.tensor.size());
  for (int64_t n :
       {static_cast<int64_t>(s.part), s.applied, s.clock, static_cast<int64_t>(s.optimizer_steps)})
    h = Fnv(h, &n, sizeof(n));
  h = Fnv(h, s.values.data(), s.values.size() * sizeof(float));
  for (const auto& [name, slot] : s.slots) {
    h = Fnv(h, name.data(), name.size());
    h = Fnv(h, slot.data(), slot.size() * sizeof(float));
  }
  return Mix(h);
}

void ReplicationQueue::AfterSent(Then then) {
  if (!failed_.ok()) return then(failed_);
  if (acked_ == sent_) return then(Status::OK());
  waiting_.emplace_back(sent_, std::move(then));
}

void ReplicationQueue::StepSent() {
  for (Then& then : step_) waiting_.emplace_back(sent_, std::move(then));
  step_.clear();
}

void ReplicationQueue::FailStep(const Status& why) {
  std::vector<Then> held = std::move(step_);
  step_.clear();
  for (Then& then : held) then(why);
}

void ReplicationQueue::Acked(int64_t seq, const Status& status) {
  if (!status.ok() && failed_.ok()) failed_ = status;
  acked_ = std::max(acked_, seq);
  // Taken out before any runs: one may queue more.
  std::vector<Then> due;
  while (!waiting_.empty() && (waiting_.front().first <= acked_ || !failed_.ok())) {
    due.push_back(std::move(waiting_.front().second));
    waiting_.pop_front();
  }
  if (!failed_.ok()) {
    for (Then& then : step_) due.push_back(std::move(then));
    step_.clear();
  }
  for (Then& then : due) then(failed_);
}

Status BackupLinks::Connect(const Logger& log, const Hello& hello,
                            const std::vector<NodeInfo>& backups, int servers) {
  std::vector<NodeInfo> dial;
  PSTRAIN_RETURN_IF_ERROR(loop_->Call<Status>(
      [&] {
        std::map<int, Link> kept;
        for (const NodeInfo& n : backups) {
          auto it = links_.find(n.rank);
          if (it != links_.end() && !it->second.conn->closed()) {
            kept.emplace(n.rank, std::move(it->second));
            links_.erase(it);
          } else {
            dial.push_back(n);
          }
        }
        for (auto& [rank, link] : links_)
          link.conn->Close(Cancelled("no longer a backup of this server"));
        links_ = std::move(kept);
        return Status::OK();
      },
      Aborted("the server is stopping")));
  auto dialed = ConnectToServers(loop_, log, hello, dial, static_cast<size_t>(servers));
  if (!dialed.ok()) return dialed.status().WithContext("a server backing this one up");
  return loop_->Call<Status>(
      [&] {
        for (size_t r = 0; r < dialed->size(); ++r)
          if ((*dialed)[r]) links_[static_cast<int>(r)] = Link{(*dialed)[r], {}};
        return Status::OK();
      },
      Aborted("the server is stopping"));
}

BackupLinks::Link::Key BackupLinks::KeyOf(const Replicate& change) {
  const bool table = IsTableReplica(change.kind);
  // A table's share is the primary's, and a server may send those of
  // several (its own and a lost server's it holds now).
  return {table, change.tensor, table ? change.origin : static_cast<int64_t>(change.part)};
}

void BackupLinks::TellClosed(int rank, const Connection* conn, const Status& why) {
  auto it = links_.find(rank);
  if (it == links_.end() || it->second.conn.get() != conn || it->second.closed_told) return;
  it->second.closed_told = true;
  if (on_closed_) on_closed_(rank, why);
}

void BackupLinks::Send(Replicate change, Payload payload, std::function<void(const Status&)> done) {
  bool posted = loop_->Post([this, change = std::move(change), payload = std::move(payload),
                             done]() mutable {
    if (links_.empty()) return done(Status::OK());
    auto all = std::make_shared<CountDown>(links_.size(), [done](const Status& st) { done(st); });
    const Link::Key key = KeyOf(change);
    const bool state =
        change.kind == ReplicaKind::kState || change.kind == ReplicaKind::kTableState;
    for (auto& [rank, link] : links_) {
      if (state) {
        link.has_state.insert(key);
      } else if (!link.has_state.count(key)) {
        continue;  // its state comes next and stands in for this change
      }
      changes_.fetch_add(1, std::memory_order_relaxed);
      bytes_.fetch_add(static_cast<int64_t>(payload.size), std::memory_order_relaxed);
      link.conn->Call(
          change,
          [this, all, rank = rank, conn = link.conn.get()](StatusOr<Incoming> reply) {
            // A link gone, or a backup that no longer holds the copy: the
            // states sent again (the next view's, or this one's once the
            // link is made again) stand in for this change.
            if (reply.status().code() == StatusCode::kUnavailable)
              return TellClosed(rank, conn, reply.status());
            if (reply.status().message().find(kNoCopy) != std::string::npos) return;
            all->Report(reply.status().WithContext(fmt::format("the backup on server {}", rank)));
          },
          payload);
    }
  });
  if (!posted) done(Aborted("the server is stopping"));
}

}  // namespace pstrain
