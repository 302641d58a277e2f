#include "embedding/background_call.h"

#include <cassert>
#include <utility>

namespace pstrain {

BackgroundCall::~BackgroundCall() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();  // a call still running ends first (it is bounded)
}

void BackgroundCall::Start(std::function<Status()> call) {
  assert(!busy_);
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  {
    std::lock_guard<std::mutex> lock(mutex_);
    call_ = std::move(call);
    done_ = false;
  }
  busy_ = true;
  wake_.notify_all();
}

Status BackgroundCall::Wait() {
  if (!busy_) return Status::OK();
  busy_ = false;
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait(lock, [this] { return done_; });
  return std::exchange(result_, Status::OK());
}

void BackgroundCall::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || call_ != nullptr; });
    if (call_ == nullptr) return;  // stopping, nothing left to run
    std::function<Status()> call = std::move(call_);
    call_ = nullptr;
    lock.unlock();
    Status result = call();
    lock.lock();
    result_ = std::move(result);
    done_ = true;
    wake_.notify_all();
  }
}

}  // namespace pstrain
