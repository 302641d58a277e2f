#include "roles/worker/rows_ahead.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <utility>

#include "roles/node/server_links.h"
#include "roles/worker/table_moves.h"

namespace pstrain {

void RowsAhead::Close() {
  std::thread last;
  {
    MutexLock lock(&mutex_);
    closed_ = true;
    last = std::move(thread_);
  }
  if (last.joinable()) last.join();
}

void RowsAhead::Start(const PreCopyRows& request, const Hello& hello,
                      std::function<void(Status)> answer) {
  MutexLock lock(&mutex_);
  if (closed_) return answer(Aborted("the worker is stopping"));
  if (running_) return answer(FailedPrecondition("rows are being copied ahead already"));
  running_ = true;
  copied_.reset();
  // The last copy's thread has finished with the mutex: it set running_.
  if (thread_.joinable()) thread_.join();
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
  // Every server there will be, each at its rank; joiners were admitted
  // before the scheduler asked, but their topology may still be on its way.
  const int count = std::max(request.from, request.to);
  auto servers = AwaitServers(cluster_, 0, count, limit_);
  if (!servers.ok()) return servers.status();
  auto links = ConnectToServers(loop_, log_, hello, *servers, static_cast<size_t>(count));
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
