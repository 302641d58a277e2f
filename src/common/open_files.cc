#include "src/common/open_files.h"

#include <fmt/format.h>
#include <sys/resource.h>

namespace pstrain {

std::string RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return "";
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return "";
  return fmt::format("open-file limit raised from {} to {} (the hard limit)", before,
                     limit.rlim_max);
}

int64_t OpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return -1;
  return static_cast<int64_t>(limit.rlim_cur);
}

Status CheckOpenFileLimit(int64_t needed, const std::string& who) {
  const int64_t limit = OpenFileLimit();
  if (limit < 0 || needed <= limit) return Status::OK();
  return FailedPrecondition(fmt::format(
      "{} needs about {} open files, and this process may open {} (ulimit -n): raise the limit",
      who, needed, limit));
}

}  // namespace pstrain
