// The names of the files in one checkpoint step's directory
// (<train.checkpoint.dir>/step-<N>/), all in one place. Which role writes
// each, and its format:
//   MANIFEST                 the chief, last (src/common/checkpoint_file.h)
//   model-layout             the chief (roles/checkpoint/model_layout.h)
//   allreduced-weights       the chief: weights with ps: false and their
//                            optimizer state (roles/worker/allreduced_weights.h)
//   server-<r>.ckpt          server r: its partitions and table rows
//                            (roles/checkpoint/shard_file.h)
//   server-<r>-store/        server r: the rows it kept on disk
//                            (roles/checkpoint/store.h)
//   worker-<r>.ckpt          the chief: worker r's place in its data
//                            (roles/checkpoint/worker_place.h)
//   ps-worker-<r>.ckpt       worker r: its compression residuals and local
//                            optimizer slots (roles/worker/ps_state.h)
#pragma once

#include <string>

namespace pstrain {

inline constexpr char kModelLayoutFileName[] = "model-layout";
inline constexpr char kAllReducedWeightsFileName[] = "allreduced-weights";
std::string ShardFileName(int rank);
std::string StoreCheckpointDirName(int rank);
std::string WorkerPlaceFileName(int rank);
std::string PsWorkerStateFileName(int rank);

}  // namespace pstrain
