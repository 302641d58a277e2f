#include "comm/ps/pull_reply.h"

#include <fmt/format.h>

#include <cstring>

#include "optim/threshold_codec.h"

namespace pstrain {

Status TakePullReply(const PullReply& reply, const uint8_t* payload, size_t size, int64_t elements,
                     bool had_view, float* values) {
  if (reply.seq == 0) return InvalidArgument("compressed pull reply names no view (seq 0)");
  if (reply.encoding == PushEncoding::kDense) {
    if (size != static_cast<size_t>(elements) * sizeof(float))
      return InvalidArgument(
          fmt::format("dense pull reply of {} bytes for {} floats", size, elements));
    std::memcpy(values, payload, size);
    return Status::OK();
  }
  if (reply.encoding != PushEncoding::kThreshold)
    return InvalidArgument(
        fmt::format("pull reply in unknown encoding {}", static_cast<int>(reply.encoding)));
  if (!had_view)
    return InvalidArgument("compressed pull reply to a pull that holds no previous reply");
  // The server sends the change's exact values, never +-tau.
  if (size > 0 && payload[0] != static_cast<uint8_t>(ThresholdFormat::kValues) &&
      payload[0] != static_cast<uint8_t>(ThresholdFormat::kValuesBitmap))
    return InvalidArgument(fmt::format(
        "compressed pull reply in threshold format {}: only exact values (3, 4) are taken",
        payload[0]));
  // Checked whole before anything is added.
  return DecodeThresholdAdd(payload, size, elements, 1.0f, values)
      .WithContext("compressed pull reply");
}

}  // namespace pstrain
