#include "comm/transport/signal_watcher.h"

#include <atomic>
#include <cassert>
#include <csignal>
#include <cstdlib>

namespace pstrain {
namespace {

std::atomic<int> g_watching{0};       // watchers of this process with their handles open
std::atomic<int> g_signals_taken{0};  // signals any watcher took
std::atomic<int> g_pending{0};        // a first signal no watcher was open for

// While no watcher is open (a node between two runs, or ending, its loop
// stopped), a signal must not kill the process with the default action and
// so overturn its exit status: a first one waits for the next watcher (an
// ending node never opens one: it already stops), and one after a signal
// was taken ends the process at once, as a second one would have.
extern "C" void AfterWatching(int signum) {
  if (g_signals_taken.load() > 0 || g_pending.load() != 0) std::_Exit(128 + signum);
  g_pending.store(signum);
}

}  // namespace

SignalWatcher::~SignalWatcher() { assert(open_ == 0); }

void SignalWatcher::Watch(std::function<void(const char*)> on_first) {
  assert(loop_->InLoopThread());
  if (open_ > 0 || loop_->IsStopping()) return;
  on_first_ = std::move(on_first);
  for (auto [handle, signum] : {std::pair{&term_, SIGTERM}, std::pair{&interrupt_, SIGINT}}) {
    uv_signal_init(loop_->uv(), handle);
    handle->data = static_cast<HandleOwner*>(this);
    if (open_++ == 0) ++g_watching;
    uv_signal_start(handle, &SignalWatcher::OnSignal, signum);
  }
  if (const int signum = g_pending.exchange(0); signum != 0)
    loop_->Post([this, signum] { Take(signum); });
}

void SignalWatcher::Close() {
  if (open_ == 0) return;
  for (uv_signal_t* h : {&term_, &interrupt_}) CloseHandle(reinterpret_cast<uv_handle_t*>(h));
}

void SignalWatcher::OnHandleClosed(uv_handle_t*) {
  // libuv put the default action back when the last handle stopped.
  if (--open_ == 0 && --g_watching == 0) {
    std::signal(SIGTERM, AfterWatching);
    std::signal(SIGINT, AfterWatching);
  }
}

void SignalWatcher::OnSignal(uv_signal_t* handle, int signum) {
  static_cast<SignalWatcher*>(static_cast<HandleOwner*>(handle->data))->Take(signum);
}

void SignalWatcher::Take(int signum) {
  ++g_signals_taken;
  if (++seen_ > 1) std::_Exit(128 + signum);  // the second: at once, as promised
  on_first_(signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

}  // namespace pstrain
