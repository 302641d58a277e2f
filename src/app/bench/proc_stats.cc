#include "src/app/bench/proc_stats.h"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace pstrain {
namespace {

// "libcublasLt.so.12", "libnccl.so.2", ".../cuda/lib64/...": the libraries a
// CUDA build links into every process.
bool IsCudaLibrary(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  return file.rfind("libcu", 0) == 0 || file.rfind("libnv", 0) == 0 ||
         file.rfind("libnccl", 0) == 0 || path.find("/cuda") != std::string::npos;
}

// The "VmRSS:    1234 kB" line's number of `status`, in MB.
double StatusMb(const std::string& status, const char* key) {
  const size_t at = status.find(key);
  if (at == std::string::npos) return 0;
  return std::strtod(status.c_str() + at + std::string(key).size(), nullptr) / 1024.0;
}

// A library's .bss is an anonymous mapping right after its file's last
// one (libcublasLt's is over 80 MB, touched at load): counted with it.
double CudaRssMb(pid_t pid) {
  std::ifstream smaps(fmt::format("/proc/{}/smaps", pid));
  std::string line;
  bool cuda = false;
  uint64_t previous_end = 0;
  double kb = 0;
  while (std::getline(smaps, line)) {
    // A mapping's first line: "start-end perms offset dev inode [path]".
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {
      char* end = nullptr;
      const uint64_t start = std::strtoull(line.c_str(), &end, 16);
      const uint64_t stop = std::strtoull(end + 1, nullptr, 16);
      const size_t path = line.find_first_of("/[");
      const bool anonymous = path == std::string::npos;
      cuda = anonymous ? cuda && start == previous_end : IsCudaLibrary(line.substr(path));
      previous_end = stop;
    } else if (cuda && line.rfind("Rss:", 0) == 0) {
      kb += std::strtod(line.c_str() + 4, nullptr);
    }
  }
  return kb / 1024.0;
}

}  // namespace

StatusOr<ProcStats> ReadProcStats(pid_t pid) {
  std::ifstream stat_file(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces and parentheses):
  // state is field 3, utime 14, stime 15.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return NotFound(fmt::format("process {} is gone", pid));
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i >= 14) ticks += std::strtod(field.c_str(), nullptr);
  std::ifstream status_file(fmt::format("/proc/{}/status", pid));
  std::string status((std::istreambuf_iterator<char>(status_file)),
                     std::istreambuf_iterator<char>());
  ProcStats stats;
  stats.cpu_s = ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  stats.rss_mb = StatusMb(status, "VmRSS:");
  stats.peak_rss_mb = StatusMb(status, "VmHWM:");
  stats.cuda_rss_mb = CudaRssMb(pid);
  return stats;
}

}  // namespace pstrain
