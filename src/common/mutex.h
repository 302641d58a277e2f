// Mutex, MutexLock, CondVar: std::mutex, a scoped lock of it and
// std::condition_variable, with the annotations of thread_annotations.h, so
// that Clang checks every GUARDED_BY(mutex_) member is touched under its
// lock. They add no cost: each is the std type inside, every call inline.
//
//   Mutex mutex_;
//   std::deque<Item> queue_ GUARDED_BY(mutex_);
//   ...
//   MutexLock lock(&mutex_);
//   changed_.Wait(&lock, [this]() REQUIRES(mutex_) { return !queue_.empty(); });
//
// A predicate runs with the lock held, but the analysis reads a lambda as a
// function of its own: say so with REQUIRES(mutex_), as above.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "src/common/thread_annotations.h"

namespace pstrain {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mutex_.lock(); }
  void Unlock() RELEASE() { mutex_.unlock(); }

 private:
  friend class MutexLock;
  std::mutex mutex_;
};

// Holds `mutex` from construction to destruction; Unlock() and Lock() let
// it go for a while in between (a slow step done unlocked).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mutex) ACQUIRE(mutex) : lock_(mutex->mutex_) {}
  ~MutexLock() RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Lock() ACQUIRE() { lock_.lock(); }
  void Unlock() RELEASE() { lock_.unlock(); }

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

// Waits give the lock up while asleep and hold it again when they return,
// as std::condition_variable's do.
class CondVar {
 public:
  void Wait(MutexLock* lock) { changed_.wait(lock->lock_); }
  template <typename Predicate>
  void Wait(MutexLock* lock, Predicate done) {
    changed_.wait(lock->lock_, std::move(done));
  }
  // Whether `done` held before `timeout` passed.
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(MutexLock* lock, std::chrono::duration<Rep, Period> timeout, Predicate done) {
    return changed_.wait_for(lock->lock_, timeout, std::move(done));
  }
  void NotifyOne() { changed_.notify_one(); }
  void NotifyAll() { changed_.notify_all(); }

 private:
  std::condition_variable changed_;
};

}  // namespace pstrain
