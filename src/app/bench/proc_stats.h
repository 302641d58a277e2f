// What another process of this machine costs, read from /proc/<pid>: for
// benches that run a real node in its own process (bench scheduler).
#pragma once

#include <sys/types.h>

#include "src/common/status.h"

namespace pstrain {

struct ProcStats {
  double cpu_s = 0;        // user + system time so far
  double rss_mb = 0;       // VmRSS
  double peak_rss_mb = 0;  // VmHWM
  // Resident bytes of the CUDA and NCCL libraries' mappings and their .bss
  // (smaps): what every process linked against them pays, whatever it does.
  double cuda_rss_mb = 0;
};

// The process's figures now; an error when it is gone or /proc unreadable.
StatusOr<ProcStats> ReadProcStats(pid_t pid);

}  // namespace pstrain
