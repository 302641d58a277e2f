// Helpers shared by the doctest suites: loggers whose lines a test can read
// and wait for (on an event, never by sleeping).
#pragma once

#include <spdlog/sinks/base_sink.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/common/logging.h"

namespace pstrain::testing {

// Keeps every formatted line; WaitFor() blocks until a line containing some
// text has been logged.
class CaptureSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> Lines();
  // Lines containing `needle`.
  std::vector<std::string> Matching(const std::string& needle);
  // Waits until at least `count` lines contain `needle`; false on timeout.
  bool WaitFor(const std::string& needle, size_t count = 1,
               std::chrono::milliseconds timeout = std::chrono::seconds(20));

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override {}

 private:
  std::mutex lines_mutex_;
  std::condition_variable changed_;
  std::vector<std::string> lines_;  // GUARDED_BY(lines_mutex_)
};

// A logger named `name` that writes to `sink` (and not to the terminal unless
// PSTRAIN_TEST_VERBOSE is set).
Logger CaptureLogger(const std::string& name, std::shared_ptr<CaptureSink> sink);

}  // namespace pstrain::testing
