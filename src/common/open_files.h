// The open-file limit of this process. A node holds a descriptor per peer it
// talks to (a server one per worker, `pstrain local` all of a job's), and
// Linux's default soft limit of 1,024 is too few for a job of hundreds of
// nodes. The hard limit is the administrator's word; the soft one is the
// process's to raise up to it, as NCCL does at start-up.
#pragma once

#include <cstdint>
#include <string>

#include "src/common/status.h"

namespace pstrain {

// Descriptors a node keeps for what is not a peer: its listener, the event
// loop's own, log and metrics files, checkpoint files being written.
inline constexpr int64_t kSpareDescriptors = 24;

// Raises the soft RLIMIT_NOFILE to the hard limit. Returns a line saying
// what changed ("open-file limit raised from 1024 to 524288"), or "" when
// nothing did (already at the hard limit, or not allowed).
std::string RaiseOpenFileLimit();

// The soft limit now; -1 when unlimited or unknown.
int64_t OpenFileLimit();

// OK when this process may hold `needed` descriptors; otherwise
// FailedPrecondition, one line naming `who`, the number it needs and the
// limit: "a server of 512 workers needs about 560 open files, and this
// process may open 256 (ulimit -n): raise the limit".
Status CheckOpenFileLimit(int64_t needed, const std::string& who);

}  // namespace pstrain
