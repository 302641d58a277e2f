#include "tests/test_util.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>
#include <filesystem>

namespace pstrain::testing {

void CaptureSink::sink_it_(const spdlog::details::log_msg& msg) {
  std::string line(msg.payload.data(), msg.payload.size());
  {
    std::lock_guard<std::mutex> lock(lines_mutex_);
    lines_.push_back(
        fmt::format("[{}] {}", std::string(msg.logger_name.data(), msg.logger_name.size()), line));
  }
  changed_.notify_all();
}

std::vector<std::string> CaptureSink::Lines() {
  std::lock_guard<std::mutex> lock(lines_mutex_);
  return lines_;
}

std::vector<std::string> CaptureSink::Matching(const std::string& needle) {
  std::vector<std::string> out;
  for (const std::string& l : Lines())
    if (l.find(needle) != std::string::npos) out.push_back(l);
  return out;
}

bool CaptureSink::WaitFor(const std::string& needle, size_t count,
                          std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(lines_mutex_);
  return changed_.wait_for(lock, timeout, [&] {
    size_t n = 0;
    for (const std::string& l : lines_) n += l.find(needle) != std::string::npos;
    return n >= count;
  });
}

Logger CaptureLogger(const std::string& name, std::shared_ptr<CaptureSink> sink) {
  std::vector<spdlog::sink_ptr> sinks{sink};
  if (std::getenv("PSTRAIN_TEST_VERBOSE") != nullptr)
    sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  Logger logger = MakeLoggerWithSinks(name, std::move(sinks));
  logger->set_level(spdlog::level::debug);
  return logger;
}

namespace {

std::map<std::string, std::function<Status()>>& Suites() {
  static auto* suites = new std::map<std::string, std::function<Status()>>;
  return *suites;
}

}  // namespace

bool SuiteNeeds(const std::string& suite, std::function<Status()> check) {
  Suites()[suite] = std::move(check);
  return true;
}

const std::map<std::string, std::function<Status()>>& SuitesWithNeeds() { return Suites(); }

Status FashionMnistInstalled() {
  for (const char* file : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    const std::string path = std::string(kFashionMnistDir) + file;
    if (!std::filesystem::exists(path))
      return NotFound(path +
                      " is missing: Fashion-MNIST is not installed (Debian package "
                      "dataset-fashion-mnist)");
  }
  return Status::OK();
}

}  // namespace pstrain::testing
