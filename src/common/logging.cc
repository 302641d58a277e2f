#include "src/common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace pstrain {

Logger MakeLogger(const std::string& name, std::vector<spdlog::sink_ptr> extra_sinks) {
  std::vector<spdlog::sink_ptr> sinks = std::move(extra_sinks);
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  auto logger = std::make_shared<spdlog::logger>(name, sinks.begin(), sinks.end());
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  return logger;
}

}  // namespace pstrain
