// Where a node resumes from, at the job's start and after a rollback: the
// newest checkpoint of this job in train.checkpoint.dir, found by each node
// and agreed by all. Servers and workers both call it before their first
// step; the checkpoint files themselves are read by their owners
// (roles/checkpoint/).
#pragma once

#include <string>

#include "src/common/checkpoint_file.h"
#include "src/common/config/config.h"
#include "src/common/logging.h"
#include "src/common/status.h"

namespace pstrain {

class ClusterClient;  // roles/node/cluster_client.h

// The checkpoint a node starts from: the newest complete one of this job
// when train.checkpoint.resume is set (and one exists), else step 0 with no
// directory. A job never takes another job's steps for its own (the
// MANIFEST records the job's identity, src/common/config/identity.h):
// - At the job's start (not `rolled_back`) the directory must be this job's:
//   with resume false it must hold no step at all, and with resume true its
//   newest complete step must be this job's. Otherwise FailedPrecondition,
//   one line naming the directory, the step and how the jobs differ. The
//   directory must be writable (checked by writing a file), so that a
//   read-only one is found before any work is done.
// - `rolled_back`: the job was paused and resumed (generation > 0): every
//   node resumes from the newest step of this job, whatever
//   train.checkpoint.resume says, or a replacement would start from scratch
//   among nodes that did not. Steps of other jobs are passed over, logged.
StatusOr<CheckpointRef> ResumeCheckpoint(const Config& config, const Logger& log,
                                         bool rolled_back = false);
// Its step.
StatusOr<int64_t> ResumeStep(const Config& config, const Logger& log);

// Every node (servers and workers) says which step it resumes from, `found`
// (ResumeCheckpoint's); the job goes on only if all say the same. This is
// the start barrier of every node: no worker trains, and so none writes a
// checkpoint, before every node has looked. A node that found another step
// (a directory not shared, or holding another job's steps) fails with
// FailedPrecondition naming `who` (this node), its step and directory, and
// the steps the others found.
Status AgreeOnResume(ClusterClient& cluster, const CheckpointRef& found, const std::string& who);

}  // namespace pstrain
