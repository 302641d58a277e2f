#include "roles/worker/ps_state.h"

#include <fmt/format.h>

#include "roles/worker/ps_averaging.h"
#include "roles/worker/ps_compression.h"
#include "src/common/checkpoint_file.h"

namespace pstrain {
namespace {

// Ties a file to its step, so one copied into another step directory is
// refused.
std::string Meta(int64_t step) { return fmt::format("ps worker state of step {}", step); }

}  // namespace

bool HasPsWorkerState(const PsCompression* compression, const PsAveraging* averaging) {
  return averaging != nullptr || (compression != nullptr && !compression->empty());
}

Status WritePsWorkerState(const std::string& step_dir, int rank, int64_t step,
                          const PsCompression* compression, const PsAveraging* averaging) {
  std::vector<Section> state;
  if (compression != nullptr) state = compression->State();
  if (averaging != nullptr)
    for (Section& s : averaging->State()) state.push_back(std::move(s));
  const std::string meta = Meta(step);
  std::vector<SectionView> views = {{"meta", meta.data(), meta.size()}};
  for (const Section& s : state) views.push_back({s.name, s.bytes.data(), s.bytes.size()});
  return WriteCheckpointFile(step_dir + "/" + PsWorkerStateFileName(rank), views);
}

Status ReadPsWorkerState(const std::string& path, int64_t step, PsCompression* compression,
                         PsAveraging* averaging) {
  auto sections = ReadCheckpointFile(path);
  if (!sections.ok()) return sections.status();
  const SectionsByName by_name = ByName(*sections);
  const std::string meta = Meta(step);
  auto found = FindSection(by_name, "meta", meta.size());
  if (!found.ok() || std::string((*found)->begin(), (*found)->end()) != meta)
    return InvalidArgument(fmt::format("{}: not the file of step {}", path, step));
  // Both restore all or nothing, so a bad averaging section after a good
  // compression one leaves the encoders restored but the run ends anyway.
  if (compression != nullptr)
    PSTRAIN_RETURN_IF_ERROR(compression->Restore(by_name).WithContext(path));
  if (averaging != nullptr) PSTRAIN_RETURN_IF_ERROR(averaging->Restore(by_name).WithContext(path));
  return Status::OK();
}

}  // namespace pstrain
