#include "comm/transport/signal_watcher.h"

#include <cassert>
#include <csignal>
#include <cstdlib>

namespace pstrain {

SignalWatcher::~SignalWatcher() { assert(open_ == 0); }

void SignalWatcher::Watch(std::function<void(const char*)> on_first) {
  assert(loop_->InLoopThread());
  if (open_ > 0 || loop_->IsStopping()) return;
  on_first_ = std::move(on_first);
  for (auto [handle, signum] : {std::pair{&term_, SIGTERM}, std::pair{&interrupt_, SIGINT}}) {
    uv_signal_init(loop_->uv(), handle);
    handle->data = static_cast<HandleOwner*>(this);
    ++open_;
    uv_signal_start(handle, &SignalWatcher::OnSignal, signum);
  }
}

void SignalWatcher::Close() {
  if (open_ == 0) return;
  for (uv_signal_t* h : {&term_, &interrupt_}) CloseHandle(reinterpret_cast<uv_handle_t*>(h));
}

void SignalWatcher::OnHandleClosed(uv_handle_t*) { --open_; }

void SignalWatcher::OnSignal(uv_signal_t* handle, int signum) {
  auto* self = static_cast<SignalWatcher*>(static_cast<HandleOwner*>(handle->data));
  if (++self->seen_ > 1) std::_Exit(128 + signum);  // the second: at once, as promised
  self->on_first_(signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

}  // namespace pstrain
