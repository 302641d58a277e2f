#include "embedding/background_call.h"

#include <cassert>
#include <utility>

namespace pstrain {

BackgroundCall::~BackgroundCall() {
  if (!thread_.joinable()) return;
  {
    MutexLock lock(&mutex_);
    stop_ = true;
  }
  wake_.NotifyAll();
  thread_.join();  // a call still running ends first (it is bounded)
}

void BackgroundCall::Start(std::function<Status()> call) {
  assert(!busy_);
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  {
    MutexLock lock(&mutex_);
    call_ = std::move(call);
    done_ = false;
  }
  busy_ = true;
  wake_.NotifyAll();
}

Status BackgroundCall::Wait() {
  if (!busy_) return Status::OK();
  busy_ = false;
  MutexLock lock(&mutex_);
  wake_.Wait(&lock, [this]() REQUIRES(mutex_) { return done_; });
  return std::exchange(result_, Status::OK());
}

void BackgroundCall::Loop() {
  MutexLock lock(&mutex_);
  for (;;) {
    wake_.Wait(&lock, [this]() REQUIRES(mutex_) { return stop_ || call_ != nullptr; });
    if (call_ == nullptr) return;  // stopping, nothing left to run
    std::function<Status()> call = std::move(call_);
    call_ = nullptr;
    lock.Unlock();
    Status result = call();
    lock.Lock();
    result_ = std::move(result);
    done_ = true;
    wake_.NotifyAll();
  }
}

}  // namespace pstrain
