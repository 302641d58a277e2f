// Compressed pulls on the worker's side: which PS tensors pull compressed
// (their compression sets `pull_density`; roles/server/pull_deltas.h is the
// servers' side), and a whole pull of them, dense.
//
// A compressed pull leaves in the worker's copy the servers' values less
// the changes not sent yet, so where the exact weights matter the worker
// pulls them whole: the chief before each test, every worker after its last
// step (so every worker ends holding exactly the servers' weights). Every
// compressed pull after that starts from this dense copy.
//
// Threads: the training thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/ps/kv_client.h"
#include "src/common/config/config.h"
#include "src/common/status.h"
#include "src/nn/layer.h"

namespace pstrain {

// Per entry of `params` (the PS tensors, in the PartitionMap's order):
// whether its pulls are compressed.
std::vector<bool> CompressedPulls(const Config& config, const std::vector<Param*>& params);

// Pulls every tensor of `params` whose `compressed` entry is set, dense, once
// every partition's clock reaches `min_clock`; nothing when none is.
Status PullWhole(KvClient* kv, const std::vector<Param*>& params,
                 const std::vector<bool>& compressed, int64_t min_clock);

// The line a worker logs at its end about its compressed pulls ("" when it
// made none): bytes per step received against dense.
std::string DescribeCompressedPulls(const KvClient& kv, int rank, int64_t steps);

}  // namespace pstrain
