#include "comm/transport/event_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "src/common/logging.h"

namespace pstrain {
namespace {

// The types of the handles still open on `loop` ("tcp, timer"), to name what
// leaked.
std::string OpenHandleTypes(uv_loop_t* loop) {
  std::string types;
  uv_walk(
      loop,
      [](uv_handle_t* h, void* arg) {
        auto* out = static_cast<std::string*>(arg);
        if (!out->empty()) *out += ", ";
        *out += uv_handle_type_name(h->type);
      },
      &types);
  return types;
}

}  // namespace

void CloseHandle(uv_handle_t* handle) {
  if (uv_is_closing(handle)) return;
  uv_close(handle, [](uv_handle_t* h) {
    if (h->data != nullptr) static_cast<HandleOwner*>(h->data)->OnHandleClosed(h);
  });
}

EventLoop::EventLoop() : security_(SecurityFrom(ClusterOptions{})) {
  uv_loop_init(&loop_);
  uv_timer_init(&loop_, &sweep_timer_);
  sweep_timer_.data = nullptr;
  uv_async_init(&loop_, &wakeup_, &EventLoop::OnAsync);
  wakeup_.data = nullptr;  // owned by the loop itself, not a HandleOwner
  uv_check_init(&loop_, &end_check_);
  uv_idle_init(&loop_, &end_idle_);
  end_check_.data = nullptr;
  end_idle_.data = nullptr;
  loop_.data = this;
}

EventLoop::~EventLoop() {
  if (started_) {
    // A leak is reported once: to whoever stopped the loop before, else here.
    const bool stopped_before = joined_;
    const Status stopped = Stop();
    if (!stopped.ok() && !stopped_before) MakeLogger("event_loop")->error("{}", stopped.message());
    return;
  }
  // Never ran: close the loop's own handles and drain so the loop closes clean.
  uv_close(reinterpret_cast<uv_handle_t*>(&wakeup_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&end_check_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&end_idle_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sweep_timer_), nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);
  uv_loop_close(&loop_);
}

Status EventLoop::Start() {
  if (started_) return FailedPrecondition("event loop already started");
  started_ = true;
  thread_ = std::thread([this] {
    thread_id_ = std::this_thread::get_id();
    uv_run(&loop_, UV_RUN_DEFAULT);  // returns once CloseAll() closed every handle
    thread_id_ = std::thread::id();  // no callback runs after uv_run
    close_result_ = uv_loop_close(&loop_);
    if (close_result_ != 0) open_handles_ = OpenHandleTypes(&loop_);
  });
  return Status::OK();
}

namespace {
std::atomic<EventLoop::LoopCheckHandler> loop_check_handler{nullptr};
}  // namespace

void EventLoop::LoopCheckFailed(const EventLoop* loop, const char* function, const char* file,
                                int line) {
  std::ostringstream caller, owner;
  caller << std::this_thread::get_id();
  owner << loop->thread_id_.load();
  const std::string message =
      fmt::format("{} ({}:{}) is loop-thread only, but ran on thread {} while the loop runs on {}",
                  function, file, line, caller.str(), owner.str());
  if (LoopCheckHandler handler = loop_check_handler.load()) return handler(message);
  MakeLogger("event_loop")->critical("{}", message);
  std::abort();
}

EventLoop::LoopCheckHandler EventLoop::SetLoopCheckHandlerForTest(LoopCheckHandler handler) {
  return loop_check_handler.exchange(handler);
}

bool EventLoop::Post(std::function<void()> fn) {
  {
    MutexLock lock(&mutex_);
    if (stopping_) return false;
    queue_.push_back(std::move(fn));
  }
  uv_async_send(&wakeup_);
  return true;
}

void EventLoop::RequestStop() {
  {
    MutexLock lock(&mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  uv_async_send(&wakeup_);
}

void EventLoop::AtEndOfIteration(std::function<void()> fn) {
  PSTRAIN_DCHECK_ON_LOOP(this);
  // Once CloseAll() ran, nothing queued could go out, and starting a closed
  // handle again would keep the loop alive for ever (a close callback that
  // sends, say a scheduler ending the job as its last connections close).
  if (uv_is_closing(reinterpret_cast<uv_handle_t*>(&end_idle_))) return;
  if (at_end_.empty()) {
    uv_check_start(&end_check_,
                   [](uv_check_t* h) { static_cast<EventLoop*>(h->loop->data)->RunAtEnd(); });
    uv_idle_start(&end_idle_,
                  [](uv_idle_t* h) { static_cast<EventLoop*>(h->loop->data)->RunAtEnd(); });
  }
  at_end_.push_back(std::move(fn));
}

void EventLoop::RunAtEnd() {
  while (!at_end_.empty()) {  // what the work queues in turn runs too
    std::vector<std::function<void()>> batch;
    batch.swap(at_end_);
    for (auto& fn : batch) fn();
  }
  uv_check_stop(&end_check_);
  uv_idle_stop(&end_idle_);
}

void EventLoop::EnsureSweep(uint64_t interval_ms, std::function<void()> fn) {
  PSTRAIN_DCHECK_ON_LOOP(this);
  if (sweep_ || uv_is_closing(reinterpret_cast<uv_handle_t*>(&sweep_timer_))) return;
  sweep_ = std::move(fn);
  uv_timer_start(
      &sweep_timer_, [](uv_timer_t* h) { static_cast<EventLoop*>(h->loop->data)->sweep_(); },
      interval_ms, interval_ms);
}

void EventLoop::NotePeerFailure(const std::string& peer) {
  constexpr size_t kMaxFailedPeers = 8;
  MutexLock lock(&mutex_);
  if (failed_peers_.size() >= kMaxFailedPeers) return;
  for (const std::string& p : failed_peers_)
    if (p == peer) return;
  failed_peers_.push_back(peer);
}

std::vector<std::string> EventLoop::failed_peers() {
  MutexLock lock(&mutex_);
  return failed_peers_;
}

bool EventLoop::IsStopping() {
  MutexLock lock(&mutex_);
  return stopping_;
}

Status EventLoop::Stop() {
  if (!started_) return Status::OK();
  if (!joined_) {
    RequestStop();
    thread_.join();
    joined_ = true;
  }
  if (close_result_ != 0)
    return Internal(fmt::format("event loop closed with handles still open ({}): {}", open_handles_,
                                uv_strerror(close_result_)));
  return Status::OK();
}

void EventLoop::OnAsync(uv_async_t* handle) {
  static_cast<EventLoop*>(handle->loop->data)->RunPosted();
}

void EventLoop::RunPosted() {
  for (;;) {
    std::function<void()> fn;
    bool stop = false;
    {
      MutexLock lock(&mutex_);
      if (queue_.empty()) {
        stop = stopping_;
      } else {
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    if (fn) {
      fn();
      continue;
    }
    if (stop) CloseAll();
    return;
  }
}

void EventLoop::CloseAll() {
  RunAtEnd();  // queued frames go out (a final Ack, say) before their sockets close
  uv_walk(
      &loop_,
      [](uv_handle_t* h, void*) {
        if (uv_is_closing(h)) return;
        if (h->data == nullptr) {
          uv_close(h, nullptr);  // the loop's own handles
        } else {
          CloseHandle(h);
        }
      },
      nullptr);
}

bool EventLoop::AllowRefusalLine(uint64_t* dropped) {
  PSTRAIN_DCHECK_ON_LOOP(this);
  const uint64_t now = NowMs();
  if (refusal_window_ms_ == 0 || now >= refusal_window_ms_ + 1000) {
    refusal_window_ms_ = std::max<uint64_t>(now, 1);
    refusal_lines_ = 0;
  }
  if (refusal_lines_ >= kRefusalLinesPerSecond) {
    ++refusals_dropped_;
    return false;
  }
  ++refusal_lines_;
  *dropped = refusals_dropped_;
  refusals_dropped_ = 0;
  return true;
}

}  // namespace pstrain
