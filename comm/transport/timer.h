// Timer: a one-shot or repeating timer on an EventLoop, so that the roles
// (heartbeats, retries, deadlines) wait on the loop without calling libuv.
//
// Loop-thread only, except the constructor. The handle is opened on the
// first Run*() and closed by Close() or by EventLoop::Stop(), like every
// handle of the loop; the owner keeps the Timer alive until then (a member
// of whatever owns or outlives the loop's stop, as for Listener). Once the
// loop is stopping, Run*() does nothing: a timer opened then would outlive
// the loop's last walk over its handles.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>

#include "comm/transport/event_loop.h"

namespace pstrain {

class Timer : public HandleOwner {
 public:
  explicit Timer(EventLoop* loop) : loop_(loop) {}
  ~Timer() override;
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Runs `fn` once, `delay_ms` from now. Replaces whatever was scheduled.
  void RunOnce(uint64_t delay_ms, std::function<void()> fn);
  // Runs `fn` every `interval_ms`, the first time one interval from now.
  // Replaces whatever was scheduled.
  void RunEvery(uint64_t interval_ms, std::function<void()> fn);
  // Cancels what is scheduled; the timer may be run again.
  void Stop();
  // Whether something is scheduled.
  bool IsRunning() const;
  // Closes the handle for good (EventLoop::Stop() does it too). Idempotent.
  void Close();

  void OnHandleClosed(uv_handle_t*) override;

 private:
  void Start(uint64_t delay_ms, uint64_t repeat_ms, std::function<void()> fn);
  static void OnTimer(uv_timer_t* handle);

  EventLoop* loop_;
  uv_timer_t timer_;
  bool open_ = false;    // initialized and not yet closed
  bool closed_ = false;  // Close()d or closed by the loop: never reopened
  std::function<void()> fn_;
};

// Runs `fn(true)` once, `delay_ms` from now, on the loop's thread, with no
// owner to keep alive: the handle frees itself once it has fired. When the
// loop stops first, `fn(false)` runs instead (from the loop's last walk
// over its handles), so that whoever waits on it is answered. Loop-thread
// only; on a loop already stopping, `fn(false)` runs at once.
void RunAfter(EventLoop* loop, uint64_t delay_ms, std::function<void(bool fired)> fn);

}  // namespace pstrain
