#include "roles/checkpoint/step_files.h"

#include <fmt/format.h>

namespace pstrain {

std::string ShardFileName(int rank) { return fmt::format("server-{}.ckpt", rank); }
std::string StoreCheckpointDirName(int rank) { return fmt::format("server-{}-store", rank); }
std::string WorkerPlaceFileName(int rank) { return fmt::format("worker-{}.ckpt", rank); }
std::string PsWorkerStateFileName(int rank) { return fmt::format("ps-worker-{}.ckpt", rank); }

}  // namespace pstrain
