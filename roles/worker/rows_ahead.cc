#include "roles/worker/rows_ahead.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <utility>

#include "comm/transport/completion.h"
#include "comm/transport/patient_connect.h"
#include "roles/worker/table_moves.h"

namespace pstrain {

StatusOr<std::vector<Connection::Ptr>> ConnectToServers(EventLoop* loop, Logger log,
                                                        const Hello& hello,
                                                        const std::vector<NodeInfo>& servers,
                                                        size_t size) {
  auto links = std::make_shared<std::vector<Connection::Ptr>>(size);
  if (servers.empty()) return *links;
  Completion<Status> all_connected;
  auto connected = CountDown::Into(all_connected, servers.size());
  bool posted = loop->Post([loop, log, servers, hello, links, connected] {
    for (const NodeInfo& s : servers) {
      std::string who = fmt::format("server rank {} at {}:{}", s.rank, s.host, s.port);
      if (s.rank < 0 || static_cast<size_t>(s.rank) >= links->size()) {
        connected->Report(Internal(who + ": a rank past the servers"));
        continue;
      }
      ConnectPatiently(loop, log, s.host, s.port, PeerConnectPatienceMs(*loop),
                       [s, who, hello, links, connected](StatusOr<Connection::Ptr> conn) {
                         if (!conn.ok()) return connected->Report(conn.status().WithContext(who));
                         (*links)[static_cast<size_t>(s.rank)] = *conn;
                         (*conn)->Start(nullptr, nullptr);
                         (*conn)->Call(hello, [who, connected](StatusOr<Incoming> reply) {
                           connected->Report(reply.status().WithContext(who));
                         });
                       });
    }
  });
  if (!posted) return Aborted("the worker is stopping");
  PSTRAIN_RETURN_IF_ERROR(all_connected.Wait());
  return *links;
}

RowsAhead::~RowsAhead() {
  if (thread_.joinable()) thread_.join();
}

void RowsAhead::Start(const PreCopyRows& request, const Hello& hello,
                      std::function<void(Status)> answer) {
  {
    MutexLock lock(&mutex_);
    if (running_) return answer(FailedPrecondition("rows are being copied ahead already"));
    running_ = true;
    copied_.reset();
  }
  if (thread_.joinable()) thread_.join();  // the last copy's, done
  thread_ = std::thread([this, request, hello, answer = std::move(answer)] {
    const auto begin = std::chrono::steady_clock::now();
    Status st = Copy(request, hello);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    {
      MutexLock lock(&mutex_);
      running_ = false;
      if (st.ok()) copied_ = request;
    }
    if (st.ok()) {
      log_->info("table rows for {} servers copied ahead in {:.0f} ms while the job trained",
                 request.to, ms);
    } else {
      log_->warn("table rows for {} servers not copied ahead ({}): they move whole at the change",
                 request.to, st.message());
    }
    loop_->Post([answer, st] { answer(st); });
  });
}

bool RowsAhead::TakeCopied(int from, int to, const std::vector<int>& slots) {
  MutexLock lock(&mutex_);
  std::optional<PreCopyRows> copied = std::move(copied_);
  copied_.reset();
  return copied && copied->from == from && copied->to == to && copied->slots == slots;
}

Status RowsAhead::Copy(const PreCopyRows& request, const Hello& hello) {
  // Every server there will be, each at its rank: the joiners are in the
  // topology before the scheduler asks.
  const int count = std::max(request.from, request.to);
  std::vector<NodeInfo> servers;
  if (auto held = cluster_->Held())
    for (const NodeInfo& n : held->nodes)
      if (n.role == Role::kServer && n.rank < count) servers.push_back(n);
  if (static_cast<int>(servers.size()) != count)
    return FailedPrecondition(
        fmt::format("the topology lists {} of the {} servers", servers.size(), count));
  auto links = ConnectToServers(loop_, log_, hello, servers, static_cast<size_t>(count));
  if (!links.ok()) return links.status().WithContext("connecting");
  auto copied = MoveTableRows(loop_, *links, request.from, request.to, request.slots, 0,
                              RowsPhase::kCopy, false, log_);
  loop_->Post([links = *links] {
    for (const Connection::Ptr& c : links)
      if (c) c->Close(Cancelled("rows copied ahead"));
  });
  return copied.status();
}

}  // namespace pstrain
