#include "roles/worker/join_offer.h"

#include <fmt/format.h>

#include "src/common/random.h"

namespace pstrain {
namespace {

constexpr char kTensors[] = "tensors ";

}  // namespace

std::string DescribeTensors(const std::vector<TensorSpec>& tensors) {
  uint64_t fingerprint = 0;
  int64_t floats = 0;
  for (const TensorSpec& t : tensors) {
    fingerprint = Mix64(fingerprint ^ HashString(t.name)) ^ static_cast<uint64_t>(t.elements);
    floats += t.elements;
  }
  return fmt::format("{} tensors, {} floats, fingerprint {:016x}", tensors.size(), floats,
                     fingerprint);
}

std::string JoinOffer(const std::vector<TensorSpec>& tensors, WorkerPlace chiefs) {
  chiefs.lr_schedule = "-";
  return kTensors + DescribeTensors(tensors) + "\n" + WorkerPlaceText(chiefs);
}

StatusOr<WorkerPlace> TakeJoinOffer(const std::string& offer, const std::vector<TensorSpec>& mine,
                                    int rank) {
  const size_t end = offer.find('\n');
  if (offer.rfind(kTensors, 0) != 0 || end == std::string::npos)
    return InvalidArgument("the chief's offer to a joining worker names no tensors");
  const std::string chiefs = offer.substr(sizeof kTensors - 1, end - (sizeof kTensors - 1));
  const std::string own = DescribeTensors(mine);
  if (chiefs != own)
    return FailedPrecondition(fmt::format(
        "worker {} has other PS tensors ({}) than the chief ({}): every worker must run the same "
        "model and parameters: rules",
        rank, own, chiefs));
  return ParseWorkerPlace(offer.substr(end + 1), "the chief's place in the data");
}

}  // namespace pstrain
