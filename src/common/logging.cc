#include "src/common/logging.h"

#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>

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

std::atomic<spdlog::level::level_enum> default_level{spdlog::level::info};

}  // namespace

std::optional<spdlog::level::level_enum> ParseLogLevel(const std::string& text) {
  // Not spdlog's from_str: it maps unknown words to "off", which would
  // silence a typo, and it spells warn "warning".
  static const std::pair<const char*, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},   {"off", spdlog::level::off}};
  for (const auto& [name, level] : kLevels)
    if (text == name) return level;
  return std::nullopt;
}

void SetDefaultLogLevel(spdlog::level::level_enum level) { default_level.store(level); }

Logger MakeLoggerWithSinks(const std::string& label, std::vector<spdlog::sink_ptr> sinks) {
  auto labels = std::make_shared<LabelSink>(label, std::move(sinks));
  auto logger = std::make_shared<spdlog::logger>(label, std::move(labels));
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
  logger->set_level(default_level.load());
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
