// A compressed pull's reply (roles/server/pull_deltas.h), taken into the
// worker's copy of one partition: dense values, or an exact-value threshold
// message (formats 3 and 4 of optim/threshold_codec.h) to add to what the
// previous reply left there. Everything is checked before anything is
// written: a bad reply is an error naming what was wrong, and the copy is
// as it was.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/transport/connection.h"
#include "comm/transport/messages.h"
#include "src/common/status.h"

namespace pstrain {

// `reply` and its `payload` (size bytes) for a partition of `elements`
// floats at `values`; `had_view`: the request named a previous reply
// (have_seq != 0), the only case a threshold message may answer.
Status TakePullReply(const PullReply& reply, const uint8_t* payload, size_t size, int64_t elements,
                     bool had_view, float* values);

// A norm pull's answer (train.clip_norm, roles/worker/norm_clip.h): the
// squared norm that `reply`, a PullReply or SparsePullReply with no
// payload, carries. A negative one is refused; NaN passes (a diverged
// step, which the norm's sum reports).
template <typename Reply>
StatusOr<double> SquaredNormIn(const StatusOr<Incoming>& reply) {
  if (!reply.ok()) return reply.status();
  const auto* answer = std::get_if<Reply>(&reply->message.body);
  if (answer == nullptr || reply->payload.size != 0)
    return InvalidArgument("a norm pull answered with values, or with another message");
  if (answer->squared_norm < 0)
    return InvalidArgument("a norm pull answered with a negative squared norm");
  return answer->squared_norm;
}

}  // namespace pstrain
