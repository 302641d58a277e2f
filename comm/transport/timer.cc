#include "comm/transport/timer.h"

#include <cassert>

namespace pstrain {

// The loop was stopped (closing the handle) or Close() ran before this.
Timer::~Timer() { assert(!open_); }

void Timer::RunOnce(uint64_t delay_ms, std::function<void()> fn) {
  Start(delay_ms, 0, std::move(fn));
}

void Timer::RunEvery(uint64_t interval_ms, std::function<void()> fn) {
  Start(interval_ms, interval_ms, std::move(fn));
}

void Timer::Start(uint64_t delay_ms, uint64_t repeat_ms, std::function<void()> fn) {
  assert(loop_->InLoopThread());
  if (closed_ || loop_->IsStopping()) return;
  if (!open_) {
    uv_timer_init(loop_->uv(), &timer_);
    timer_.data = static_cast<HandleOwner*>(this);
    open_ = true;
  }
  fn_ = std::move(fn);
  uv_timer_start(&timer_, &Timer::OnTimer, delay_ms, repeat_ms);
}

void Timer::Stop() {
  if (open_ && !uv_is_closing(reinterpret_cast<uv_handle_t*>(&timer_))) uv_timer_stop(&timer_);
}

bool Timer::IsRunning() const {
  return open_ && uv_is_active(reinterpret_cast<const uv_handle_t*>(&timer_)) != 0;
}

void Timer::Close() {
  closed_ = true;
  if (open_) CloseHandle(reinterpret_cast<uv_handle_t*>(&timer_));
}

void Timer::OnHandleClosed(uv_handle_t*) {
  open_ = false;
  closed_ = true;
}

void Timer::OnTimer(uv_timer_t* handle) {
  auto* self = static_cast<Timer*>(static_cast<HandleOwner*>(handle->data));
  // A copy: `fn` may schedule the timer anew, replacing fn_ while it runs.
  std::function<void()> fn = self->fn_;
  fn();
}

namespace {

// RunAfter's handle: deletes itself once closed, fired or not.
class OneShotTimer : public HandleOwner {
 public:
  explicit OneShotTimer(std::function<void(bool)> fn) : fn_(std::move(fn)) {}
  void OnHandleClosed(uv_handle_t*) override {
    if (fn_) fn_(false);  // the loop stopped before it fired
    delete this;
  }
  static void OnTimer(uv_timer_t* handle) {
    auto* self = static_cast<OneShotTimer*>(static_cast<HandleOwner*>(handle->data));
    std::function<void(bool)> fn = std::move(self->fn_);
    self->fn_ = nullptr;
    CloseHandle(reinterpret_cast<uv_handle_t*>(handle));
    fn(true);
  }
  uv_timer_t handle;

 private:
  std::function<void(bool)> fn_;
};

}  // namespace

void RunAfter(EventLoop* loop, uint64_t delay_ms, std::function<void(bool fired)> fn) {
  PSTRAIN_DCHECK_ON_LOOP(loop);
  if (loop->IsStopping()) return fn(false);
  auto* timer = new OneShotTimer(std::move(fn));
  uv_timer_init(loop->uv(), &timer->handle);
  timer->handle.data = static_cast<HandleOwner*>(timer);
  uv_timer_start(&timer->handle, &OneShotTimer::OnTimer, delay_ms, 0);
}

}  // namespace pstrain
