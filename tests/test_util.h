// Helpers shared by the doctest suites: loggers whose lines a test can read
// and wait for (on an event, never by sleeping), and test suites that need
// something a machine may lack.
#pragma once

#include <spdlog/sinks/base_sink.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/common/logging.h"
#include "src/common/status.h"

namespace pstrain::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/pstrain-test-XXXXXX";
    path_ = mkdtemp(pattern.data()) ? pattern : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

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

// A logger labelled `name` (SetLogLabel relabels it) that writes to `sink`
// (and not to the terminal unless PSTRAIN_TEST_VERBOSE is set).
Logger CaptureLogger(const std::string& name, std::shared_ptr<CaptureSink> sink);

// A test suite whose cases need something this machine may lack (a GPU, a
// data set); `check` says why they cannot run here. Such a suite is its own
// CTest test, `binary --run-suite=NAME` (tests/CMakeLists.txt): it runs only
// that suite, or prints why not and exits 77, which CTest counts as skipped.
// Every other run of the binary leaves the suite out (doctest_main.cc).
// Returns true, for use in a namespace-scope initializer.
bool SuiteNeeds(const std::string& suite, std::function<Status()> check);
// The suites registered so far, by name.
const std::map<std::string, std::function<Status()>>& SuitesWithNeeds();

// Where Debian's dataset-fashion-mnist package puts Fashion-MNIST.
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist/";
// OK when Fashion-MNIST is installed; otherwise says what is missing.
Status FashionMnistInstalled();

}  // namespace pstrain::testing
