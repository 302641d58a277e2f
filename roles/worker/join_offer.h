// JoinOffer: what the chief hands the workers at a live change of workers
// (roles/worker/trainer_workers.cc), through the scheduler's barrier: the PS
// tensors it trains, which a joiner checks its own against, and its place in
// the data at the change's step, which every worker plans the rest of the
// epoch from (roles/checkpoint/worker_place.h, PlanEpochs), the joiners
// included. Text, at most a few hundred bytes (a barrier's blob is at most
// 4 KiB): the place leaves out its lr schedule, which each worker knows.
#pragma once

#include <string>
#include <vector>

#include "comm/ps/partition_map.h"
#include "roles/checkpoint/worker_place.h"
#include "src/common/status.h"

namespace pstrain {

// "3 tensors, 1200 floats, fingerprint 0123456789abcdef": equal for equal
// lists (names, sizes and order).
std::string DescribeTensors(const std::vector<TensorSpec>& tensors);

std::string JoinOffer(const std::vector<TensorSpec>& tensors, WorkerPlace chiefs);
// The chief's place, once `mine` (this worker's tensors) are the chief's;
// the error names both lists otherwise.
StatusOr<WorkerPlace> TakeJoinOffer(const std::string& offer, const std::vector<TensorSpec>& mine,
                                    int rank);

}  // namespace pstrain
