// A worker's own part of a checkpoint on the PS path: the
// threshold encoders and momentum buffers of its compressed pushes
// (PsCompression) and, in mode average, its local optimizers' slots
// (PsAveraging).
//
// Everything else in a checkpoint is written by the servers or the chief
// (the places of all workers are functions of the step). This state only
// its worker holds, so at a checkpoint step every worker writes its own
// file "ps-worker-<rank>.ckpt" into the step directory and the workers meet
// at a barrier; only then does the chief begin the checkpoint, whose
// MANIFEST lists one file per worker. On resume each worker reads its own.
// A run with another worker count starts this state at zero, as the ring
// path does: a residual is one worker's leftover of its own gradients,
// which no rule shares out among another number of workers.
//
// Threads: the training thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "roles/checkpoint/step_files.h"
#include "src/common/status.h"

namespace pstrain {

class PsAveraging;    // roles/worker/ps_averaging.h
class PsCompression;  // roles/worker/ps_compression.h

// Whether this worker has such state (either pointer may be null).
bool HasPsWorkerState(const PsCompression* compression, const PsAveraging* averaging);

// Writes this worker's state at `step` into `step_dir` (atomically, as
// every checkpoint file).
Status WritePsWorkerState(const std::string& step_dir, int rank, int64_t step,
                          const PsCompression* compression, const PsAveraging* averaging);

// Restores this worker's state from `path`, the file of `step`: every
// section checked before anything changes. The error names the file.
Status ReadPsWorkerState(const std::string& path, int64_t step, PsCompression* compression,
                         PsAveraging* averaging);

}  // namespace pstrain
