#include "roles/server/metrics.h"

#include <chrono>

namespace pstrain {

ServerMetrics::ServerMetrics(const std::string& log_dir, int rank, const Logger& log,
                             std::function<ServerSample()> sample, int interval_ms)
    : metrics_(log_dir, "server", rank, log),
      sample_(std::move(sample)),
      interval_ms_(interval_ms),
      thread_([this] { Run(); }) {}

void ServerMetrics::Run() {
  MutexLock lock(&mutex_);
  while (!stopping_) {
    if (wake_.WaitFor(&lock, std::chrono::milliseconds(interval_ms_),
                      [this]() REQUIRES(mutex_) { return stopping_; }))
      break;
    lock.Unlock();
    const ServerSample s = sample_();
    if (s.updates != written_updates_) Write(s);
    lock.Lock();
  }
}

void ServerMetrics::Stop() {
  {
    MutexLock lock(&mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.NotifyAll();
  thread_.join();
  Write(sample_());
}

void ServerMetrics::Write(const ServerSample& s) {
  written_updates_ = s.updates;
  nlohmann::ordered_json line;
  line["updates"] = s.updates;
  line["bytes_sent"] = s.bytes_sent;
  line["bytes_received"] = s.bytes_received;
  line["rows"] = s.rows;
  metrics_.Write("server", line);
}

}  // namespace pstrain
