// SignalWatcher: SIGTERM and SIGINT delivered to an EventLoop, so that a node
// stops cleanly from its loop instead of dying where the signal lands.
//
// The first signal calls `on_first` on the loop thread; a second one (of
// either kind) ends the process at once with status 128 + its number, as a
// shell user pressing Ctrl-C twice expects. While no watcher of the process
// is open (its node between two runs, or ending), a first signal waits for
// the next watcher, so that an ending node's own exit status stands (a
// launcher's SIGTERM that comes late), and one after a signal was taken
// still ends it at once. Like Timer, the handles are opened on Watch() and
// closed by Close() or EventLoop::Stop(); the owner keeps the watcher alive
// until then. Loop-thread only, except the constructor.
#pragma once

#include <uv.h>

#include <functional>

#include "comm/transport/event_loop.h"

namespace pstrain {

class SignalWatcher : public HandleOwner {
 public:
  explicit SignalWatcher(EventLoop* loop) : loop_(loop) {}
  ~SignalWatcher() override;
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // `name` is "SIGTERM" or "SIGINT".
  void Watch(std::function<void(const char* name)> on_first);
  void Close();
  void OnHandleClosed(uv_handle_t* handle) override;

 private:
  static void OnSignal(uv_signal_t* handle, int signum);
  void Take(int signum);

  EventLoop* loop_;
  uv_signal_t term_{}, interrupt_{};
  int open_ = 0;  // handles initialized and not yet closed
  int seen_ = 0;  // signals received
  std::function<void(const char*)> on_first_;
};

}  // namespace pstrain
