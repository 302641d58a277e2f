// BackgroundCall: one thread that runs one call at a time for its owner,
// who starts a call and later waits for its Status. TieredTable writes the
// rows leaving memory on it while the batch's own rows are read and used.
// A thread kept for the owner's life, not one per call: a new thread costs
// its stack's first page faults (a 2 MiB huge page, zeroed) every time.
//
// Thread-safety: Start and Wait are the owner's (one thread); the call runs
// on the background thread and must touch only what the owner leaves alone
// until Wait returns.
#pragma once

#include <functional>
#include <thread>

#include "src/common/mutex.h"
#include "src/common/status.h"

namespace pstrain {

class BackgroundCall {
 public:
  BackgroundCall() = default;
  ~BackgroundCall();
  BackgroundCall(const BackgroundCall&) = delete;
  BackgroundCall& operator=(const BackgroundCall&) = delete;

  // Runs `call` on the thread (started on first use). One call at a time:
  // Wait for the previous one first.
  void Start(std::function<Status()> call);
  // Whether a call was started and not yet waited for.
  bool busy() const { return busy_; }
  // The started call's Status once it has returned (OK when none was
  // started). A call is a bounded piece of local work (a RocksDB write), so
  // this waits without a deadline.
  Status Wait();

 private:
  void Loop();

  std::thread thread_;
  bool busy_ = false;  // owner's view: started, not waited for
  Mutex mutex_;
  CondVar wake_;
  std::function<Status()> call_ GUARDED_BY(mutex_);  // to run
  bool done_ GUARDED_BY(mutex_) = false;             // call_ returned
  bool stop_ GUARDED_BY(mutex_) = false;
  Status result_ GUARDED_BY(mutex_);
};

}  // namespace pstrain
