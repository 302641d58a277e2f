#include "src/common/work_thread.h"

namespace pstrain {

WorkThread::WorkThread() : thread_([this] { Run(); }) {}

WorkThread::~WorkThread() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  wake_.NotifyOne();
  thread_.join();
}

void WorkThread::Post(std::function<void()> fn) {
  {
    MutexLock lock(&mutex_);
    queue_.push_back(std::move(fn));
  }
  wake_.NotifyOne();
}

void WorkThread::Run() {
  for (;;) {
    std::function<void()> fn;
    {
      MutexLock lock(&mutex_);
      wake_.Wait(&lock, [this]() REQUIRES(mutex_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

}  // namespace pstrain
