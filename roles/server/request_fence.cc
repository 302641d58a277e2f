#include "roles/server/request_fence.h"

#include <fmt/format.h>

#include <utility>

namespace pstrain {

namespace {
// How often a waiting request looks again: the scheduler's answer comes
// within a round trip.
constexpr uint64_t kRecheckMs = 10;
}  // namespace

RequestFence::RequestFence(EventLoop* loop, std::function<bool()> counted_in, Serve serve,
                           uint64_t patience_ms)
    : loop_(loop),
      counted_in_(std::move(counted_in)),
      serve_(std::move(serve)),
      patience_ms_(patience_ms),
      timer_(loop) {}

bool RequestFence::Hold(const Connection::Ptr& conn, Incoming& in) {
  // Behind what waits, so requests are served in the order they came.
  if (waiting_.empty() && counted_in_()) return false;
  waiting_.push_back({conn, std::move(in), loop_->NowMs()});
  if (!timer_.IsRunning()) timer_.RunEvery(kRecheckMs, [this] { Check(); });
  return true;
}

void RequestFence::Check() {
  if (counted_in_()) {
    timer_.Stop();
    std::deque<Waiting> ready = std::move(waiting_);
    waiting_.clear();
    for (Waiting& w : ready)
      if (!w.conn || !w.conn->closed()) serve_(w.conn, std::move(w.in));
    return;
  }
  if (loop_->NowMs() - waiting_.front().since_ms < patience_ms_) return;
  Drop(Unavailable(fmt::format(
      "this server could not learn within {} ms whether the scheduler still counts it in",
      patience_ms_)));
}

void RequestFence::Drop(const Status& why) {
  timer_.Stop();
  std::deque<Waiting> dropped = std::move(waiting_);
  waiting_.clear();
  for (Waiting& w : dropped) {
    ++dropped_;
    if (w.conn) w.conn->Close(why);
  }
}

}  // namespace pstrain
