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

}  // namespace pstrain
