#include "src/common/logging.h"

#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace pstrain {
namespace {

// Sits between a logger and its real sinks and writes the current label where
// they read the logger's name (`%n`, log_msg::logger_name). spdlog fixes a
// logger's name at construction, so the label lives here instead; the sink's
// own mutex, which every line already takes, guards it.
class LabelSink : public spdlog::sinks::dist_sink<std::mutex> {
 public:
  LabelSink(std::string label, std::vector<spdlog::sink_ptr> sinks)
      : dist_sink(std::move(sinks)), label_(std::move(label)) {}

  void SetLabel(const std::string& label) {
    std::lock_guard<std::mutex> lock(mutex_);
    label_ = label;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::details::log_msg labelled = msg;
    labelled.logger_name = label_;  // read under mutex_, held by base_sink::log
    dist_sink::sink_it_(labelled);
  }

 private:
  std::string label_;  // GUARDED_BY(mutex_)
};

}  // namespace

Logger MakeLoggerWithSinks(const std::string& label, std::vector<spdlog::sink_ptr> sinks) {
  auto labels = std::make_shared<LabelSink>(label, std::move(sinks));
  auto logger = std::make_shared<spdlog::logger>(label, std::move(labels));
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  return logger;
}

Logger MakeLogger(const std::string& label, std::vector<spdlog::sink_ptr> extra_sinks) {
  std::vector<spdlog::sink_ptr> sinks = std::move(extra_sinks);
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  return MakeLoggerWithSinks(label, std::move(sinks));
}

void SetLogLabel(const Logger& log, const std::string& label) {
  for (const spdlog::sink_ptr& sink : log->sinks())
    if (auto labels = std::dynamic_pointer_cast<LabelSink>(sink)) labels->SetLabel(label);
}

}  // namespace pstrain
