// ServerMetrics: a server's lines in its metrics file (roles/node/metrics_log.h):
// {"event":"server", ..., "updates", "bytes_sent", "bytes_received", "rows"},
// all totals since the server started. A thread of its own samples the
// server every few seconds and writes a line when updates came in since the
// last one (an idle server writes nothing), and Stop() writes the last line.
// The sampler runs on that thread, so it may block briefly (asking the
// table thread for its rows) without holding up the server's loop.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "roles/node/metrics_log.h"
#include "src/common/mutex.h"

namespace pstrain {

struct ServerSample {
  int64_t updates = 0;  // gradient pushes received (dense partitions and table rows)
  uint64_t bytes_sent = 0, bytes_received = 0;
  int64_t rows = 0;  // embedding table rows held
};

class ServerMetrics {
 public:
  static constexpr int kIntervalMs = 5000;

  ServerMetrics(const std::string& log_dir, int rank, const Logger& log,
                std::function<ServerSample()> sample, int interval_ms = kIntervalMs);
  ~ServerMetrics() { Stop(); }
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // Ends the thread and writes the final line. Idempotent.
  void Stop();

 private:
  void Run();
  void Write(const ServerSample& s);

  MetricsLog metrics_;
  std::function<ServerSample()> sample_;
  const int interval_ms_;
  Mutex mutex_;
  CondVar wake_;
  bool stopping_ GUARDED_BY(mutex_) = false;
  int64_t written_updates_ = -1;  // sampler thread, then Stop()'s caller
  std::thread thread_;            // last: starts once the rest is set
};

}  // namespace pstrain
