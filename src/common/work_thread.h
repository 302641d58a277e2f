// WorkThread: one thread that runs posted closures in order. The owner of a
// piece of state gives it to one WorkThread, and every access is a closure
// posted there, so the state needs no lock.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "src/common/mutex.h"

namespace pstrain {

class WorkThread {
 public:
  WorkThread();
  ~WorkThread();  // runs what was posted, then joins
  WorkThread(const WorkThread&) = delete;
  WorkThread& operator=(const WorkThread&) = delete;

  // Any thread. Closures run in order of posting.
  void Post(std::function<void()> fn);
  bool InThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void Run();

  Mutex mutex_;
  CondVar wake_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace pstrain
