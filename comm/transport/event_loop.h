// EventLoop: one libuv loop on its own thread, the only thread that touches
// the sockets and timers registered with it.
//
// Other threads hand it work with Post(); the closure runs on the loop thread
// (queue + uv_async_send). Loop callbacks never block, and do no math that
// scales with the job: the one exception is a server's small partitions
// (up to 16 KiB, roles/server/server.cc kLoopShardBytes), updated on the loop
// thread because handing an update that takes microseconds to a shard thread
// and back costs more than the update itself.
// Stop() closes every handle still open (each owner learns of it through
// HandleOwner::OnHandleClosed) and joins the thread, so a stopped loop is
// always closed clean.
//
// Loop-only methods (here, Connection's, KvClient's loop half, the
// Scheduler's handlers) begin with PSTRAIN_DCHECK_ON_LOOP(loop): in a build
// with asserts on (NDEBUG not defined: Debug, the clang build of tests/fuzz)
// a call from another thread while the loop runs logs the function and both
// threads and aborts. A programming error, never reachable by input; in
// Release it compiles to nothing.
#pragma once

#include <uv.h>

#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/transport/security.h"
#include "src/common/config/options.h"
#include "src/common/mutex.h"
#include "src/common/status.h"

namespace pstrain {

class TlsContext;  // comm/transport/tls.h

// Everything that owns a libuv handle sets handle->data to itself (as a
// HandleOwner*) and must stay alive until OnHandleClosed is called for it.
class HandleOwner {
 public:
  virtual ~HandleOwner() = default;
  // Runs on the loop thread once libuv has closed `handle`.
  virtual void OnHandleClosed(uv_handle_t* handle) = 0;
};

// Closes `handle` and reports to its owner (handle->data) when done. Safe to
// call on a handle already closing. Loop thread only.
void CloseHandle(uv_handle_t* handle);

class EventLoop {
 public:
  EventLoop();
  // Stop()s and joins; logs a handle left open unless an earlier Stop()
  // returned that error.
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Starts the loop thread.
  Status Start();
  // Runs `fn` on the loop thread, in order of posting. Any thread. Returns
  // false (and drops `fn`) once the loop is stopping; work accepted before
  // that always runs.
  bool Post(std::function<void()> fn);
  // Closes every open handle, ends the loop and joins its thread. Any thread
  // but the loop's own; idempotent. An error means a handle outlived the loop
  // (a bug in its owner).
  Status Stop();
  // Asks the loop to stop without waiting (callable from the loop thread).
  void RequestStop();

  // Runs `fn` on the loop thread and waits for its result. Never call it from
  // the loop thread. If the loop stops first, returns `if_stopped`.
  template <typename T>
  T Call(std::function<T()> fn, T if_stopped);

  // Runs `fn` once this loop iteration's I/O callbacks are done, so that what
  // several callbacks queue (e.g. frames for one socket) goes out together.
  // Loop thread only.
  void AtEndOfIteration(std::function<void()> fn);

  // True once Stop()/RequestStop() was called: owners must not open new
  // handles then.
  bool IsStopping();

  bool InLoopThread() const { return std::this_thread::get_id() == thread_id_; }
  // Whether the caller may touch loop-only state: it is the loop thread, or
  // no loop thread runs (before Start(), after Stop()), when the loop's
  // owner has that state to itself. What PSTRAIN_DCHECK_ON_LOOP checks.
  bool MayTouchLoopState() const {
    const std::thread::id loop = thread_id_.load();
    return loop == std::thread::id() || loop == std::this_thread::get_id();
  }
  // A failed PSTRAIN_DCHECK_ON_LOOP: `function` (at file:line) ran on this
  // thread while `loop`'s thread runs. Logs that and calls the failure
  // handler, which aborts unless a test swapped it (below).
  static void LoopCheckFailed(const EventLoop* loop, const char* function, const char* file,
                              int line);
  // Tests only: what a failed check calls instead of std::abort (it gets
  // the logged line); null restores the abort. Returns the previous one.
  using LoopCheckHandler = void (*)(const std::string& line);
  static LoopCheckHandler SetLoopCheckHandlerForTest(LoopCheckHandler handler);
  uv_loop_t* uv() { return &loop_; }
  // The loop's clock in milliseconds, as of the start of this iteration.
  // Loop thread only.
  uint64_t NowMs() { return uv_now(&loop_); }
  // The same clock read now, not as of this round of callbacks: one that
  // took long (or a process stopped inside it) leaves NowMs behind. Loop
  // thread.
  uint64_t FreshNowMs() {
    uv_update_time(&loop_);
    return uv_now(&loop_);
  }

  // Tests only (PSTRAIN_TEST_FAULT, see TestFault): the fault this loop's
  // connections inject, and the push frames counted towards it. Set before
  // Start(); then loop thread only.
  void SetTestFault(const TestFault& fault) { test_fault_ = fault; }
  const TestFault& test_fault() const { return test_fault_; }
  int64_t CountPushFrame() { return ++push_frames_; }

  // Frame bytes (headers and payloads, before TLS) this loop's connections
  // queued to send and read: the node's traffic, for its metrics file.
  // Counted on the loop thread; read from any thread.
  void CountSent(uint64_t n) { bytes_sent_.fetch_add(n, std::memory_order_relaxed); }
  void CountReceived(uint64_t n) { bytes_received_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  uint64_t bytes_received() const { return bytes_received_.load(std::memory_order_relaxed); }

  // The TLS identity every connection of this loop uses (PSTRAIN_TLS_*);
  // null: plaintext. Set before Start(); then loop thread only.
  void set_tls(std::shared_ptr<TlsContext> tls) { tls_ = std::move(tls); }
  const std::shared_ptr<TlsContext>& tls() const { return tls_; }
  // Who may connect and what a peer may cost (comm/transport/security.h): set before
  // Start(); then loop thread only. Defaults: ClusterOptions' defaults.
  void SetSecurity(const SecuritySettings& security) { security_ = security; }
  const SecuritySettings& security() const { return security_; }
  // Accepted connections still in their handshake (Listener caps them).
  // Loop thread only.
  int& handshaking() { return handshaking_; }
  // Whether a line about a peer refused before it authenticated may be
  // logged now: at most kRefusalLinesPerSecond a second, so that a flood of
  // strangers cannot fill the disk. `dropped` gets how many were not logged
  // since the last one that was. Loop thread only.
  static constexpr int kRefusalLinesPerSecond = 10;
  bool AllowRefusalLine(uint64_t* dropped);

  // Peers this loop dialed ("host:port" as dialed) whose connection failed
  // or broke for a reason other than this node's own stop, the first few in
  // order: how a node names the peer it lost. Noted on the loop thread,
  // read from any.
  void NotePeerFailure(const std::string& peer);
  std::vector<std::string> failed_peers();

  // Runs `fn` every `interval_ms` on the loop thread, from the first call
  // until the loop stops; later calls change nothing. How connections check
  // their deadlines (handshake, a stalled frame) with no timer each. Loop
  // thread only.
  void EnsureSweep(uint64_t interval_ms, std::function<void()> fn);

 private:
  static void OnAsync(uv_async_t* handle);
  void RunAtEnd();
  void RunPosted();
  void CloseAll();

  uv_loop_t loop_;
  uv_async_t wakeup_;
  // Both run RunAtEnd(): the check handle right after the I/O callbacks, the
  // idle handle (which also keeps the next poll from blocking) for work
  // queued later in an iteration, e.g. by a close callback.
  uv_check_t end_check_;
  uv_idle_t end_idle_;
  std::vector<std::function<void()>> at_end_;  // loop thread only
  std::thread thread_;
  // The loop thread's id while it runs uv_run; none before and after.
  std::atomic<std::thread::id> thread_id_{std::thread::id()};
  Mutex mutex_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::vector<std::string> failed_peers_ GUARDED_BY(mutex_);
  bool started_ = false;
  bool joined_ = false;
  int close_result_ = 0;      // uv_loop_close() on the loop thread, read after join
  std::string open_handles_;  // when it failed, the types left open ("tcp, timer")
  TestFault test_fault_;
  int64_t push_frames_ = 0;
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0};
  std::shared_ptr<TlsContext> tls_;
  SecuritySettings security_;
  int handshaking_ = 0;
  uint64_t refusal_window_ms_ = 0;  // start of the current second
  int refusal_lines_ = 0;           // logged in it
  uint64_t refusals_dropped_ = 0;   // not logged since the last logged line
  uv_timer_t sweep_timer_;
  std::function<void()> sweep_;  // loop thread only
};

#ifndef NDEBUG
#define PSTRAIN_DCHECK_ON_LOOP(loop)                                                             \
  do {                                                                                           \
    const ::pstrain::EventLoop* pstrain_checked_loop = (loop);                                   \
    if (!pstrain_checked_loop->MayTouchLoopState())                                              \
      ::pstrain::EventLoop::LoopCheckFailed(pstrain_checked_loop, __PRETTY_FUNCTION__, __FILE__, \
                                            __LINE__);                                           \
  } while (false)
#else
#define PSTRAIN_DCHECK_ON_LOOP(loop) \
  do {                               \
  } while (false)
#endif

template <typename T>
T EventLoop::Call(std::function<T()> fn, T if_stopped) {
  auto result = std::make_shared<std::promise<T>>();
  std::future<T> future = result->get_future();
  // The promise lives in the closure alone (moved there): if the closure is
  // dropped unrun, the future reports a broken promise. A loop that stopped
  // refuses it at once.
  if (!Post([fn = std::move(fn), result = std::move(result)] { result->set_value(fn()); }))
    return if_stopped;
  try {
    return future.get();
  } catch (const std::future_error&) {
    return if_stopped;
  }
}

}  // namespace pstrain
