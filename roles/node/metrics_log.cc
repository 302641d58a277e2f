#include "roles/node/metrics_log.h"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace pstrain {
namespace {

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string MetricsLog::PathFor(const std::string& dir, const std::string& role, int rank) {
  return (std::filesystem::path(dir.empty() ? "." : dir) /
          fmt::format("metrics-{}-{}.jsonl", role, rank))
      .string();
}

MetricsLog::MetricsLog(const std::string& dir, const std::string& role, int rank, const Logger& log)
    : path_(PathFor(dir, role, rank)), role_(role), rank_(rank), opened_(UnixSeconds()), log_(log) {
  std::error_code ec;
  std::filesystem::create_directories(dir.empty() ? "." : dir, ec);
  if (ec) {
    log_->warn("no metrics file: cannot make the log directory '{}' (PSTRAIN_LOG_DIR): {}", dir,
               ec.message());
    return;
  }
  file_ = std::fopen(path_.c_str(), "a");
  if (file_ == nullptr)
    log_->warn("no metrics file: cannot open '{}' for appending (PSTRAIN_LOG_DIR): {}", path_,
               std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

bool MetricsLog::enabled() {
  MutexLock lock(&mutex_);
  return file_ != nullptr;
}

void MetricsLog::Write(const std::string& event, const nlohmann::ordered_json& fields) {
  const double now = UnixSeconds();
  nlohmann::ordered_json line;
  line["event"] = event;
  line["time"] = now;
  line["elapsed_s"] = now - opened_;
  line["role"] = role_;
  line["rank"] = rank_;
  for (const auto& [key, value] : fields.items()) line[key] = value;
  // Non-finite numbers (a diverged loss) are written as null, and invalid
  // UTF-8 is replaced, so every line stays valid JSON.
  std::string text = line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  text += '\n';
  MutexLock lock(&mutex_);
  if (file_ == nullptr) return;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0) {
    // One warning, then no more attempts: a full disk must not flood the log.
    log_->warn("metrics file '{}' stopped: {}", path_, std::strerror(errno));
    std::fclose(file_);
    file_ = nullptr;
  }
}

}  // namespace pstrain
