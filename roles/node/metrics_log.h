// MetricsLog: a node's metrics file, <log dir>/metrics-<role>-<rank>.jsonl,
// one JSON object a line (the schema is a contract: docs/formats.md, "Metrics files", the
// docs/operations.md, "Metrics"; `pstrain plot` and the scheduler's HTTP view read it).
//
// Lines are appended, so a restarted node continues its own file. A
// directory that cannot be made or a file that cannot be opened costs one
// warning line and the node trains on without metrics: a metrics file is an
// aid, never a reason to lose a run. Each line is flushed as it is written
// (lines come every log_every steps or every few seconds, so this is cheap).
// Thread-safe: Write() may be called from any thread.
#pragma once

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "src/common/logging.h"
#include "src/common/mutex.h"

namespace pstrain {

class MetricsLog {
 public:
  // Opens (creates) <dir>/metrics-<role>-<rank>.jsonl for appending, making
  // `dir` if missing. On failure the log is disabled and `log` gets one
  // warning naming the path and why.
  MetricsLog(const std::string& dir, const std::string& role, int rank, const Logger& log);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  bool enabled();
  const std::string& path() const { return path_; }
  // Appends {"event": event, "time": unix seconds, "elapsed_s": since this
  // log was opened, "role", "rank", then `fields`' keys in their order}.
  void Write(const std::string& event, const nlohmann::ordered_json& fields);

  // "<dir>/metrics-<role>-<rank>.jsonl".
  static std::string PathFor(const std::string& dir, const std::string& role, int rank);

 private:
  std::string path_;
  std::string role_;
  int rank_;
  double opened_;  // unix seconds
  Logger log_;
  Mutex mutex_;
  std::FILE* file_ GUARDED_BY(mutex_) = nullptr;  // once open; null: disabled
};

}  // namespace pstrain
