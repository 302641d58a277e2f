// Completion<T>: a result produced on the loop thread and awaited on another.
// Copies share one result, so a copy can travel into loop callbacks.
// Set() may be called more than once; only the first value counts, so every
// path that can end an operation (reply, error, connection loss) may simply
// report, without bookkeeping of who came first.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>

namespace pstrain {

template <typename T>
class Completion {
 public:
  Completion() : state_(std::make_shared<State>()) {
    state_->future = state_->promise.get_future().share();
  }

  // Any thread. Later calls are ignored.
  void Set(T value) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->set) return;
    state_->set = true;
    state_->promise.set_value(std::move(value));
  }
  bool IsSet() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->set;
  }
  // Blocks until set. Any number of times, from any copy.
  T Wait() const { return state_->future.get(); }
  // Blocks at most `timeout`; nullopt when not set by then.
  std::optional<T> WaitFor(std::chrono::milliseconds timeout) const {
    if (state_->future.wait_for(timeout) != std::future_status::ready) return std::nullopt;
    return state_->future.get();
  }

 private:
  struct State {
    std::mutex mutex;
    bool set = false;  // GUARDED_BY(mutex)
    std::promise<T> promise;
    std::shared_future<T> future;  // the waiting side
  };
  std::shared_ptr<State> state_;  // copies share it: hand one to a callback
};

}  // namespace pstrain
