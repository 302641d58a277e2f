// PullDeltas: one partition's compressed pulls (a tensor whose compression
// sets `pull_density`): the servers' side of a slow network, where a dense
// pull of every weight each step costs as much as a dense push.
//
// The server keeps, per worker, the copy of the partition that worker holds
// (its view). A pull computes d = values - view, picks tau so that the
// largest `density` share of |d| reach it (MagnitudeQuantile, as the warm-up
// picks its tau), and answers with those elements' d as an exact-value
// threshold message (formats 3 and 4 of optim/threshold_codec.h). The same
// message is then added to a copy of the view by the same decoder the
// worker runs (w += value, float for float), so the worker's copy and the
// server's view stay bit-identical and nothing drifts: what is not sent
// this time is in the next d. An element thus lags the servers' value by
// what the pulls have not sent yet, never by more (no +-tau clipping).
//
// A worker's copy must be exactly what this server's answers made it. Each
// view is named by a sequence number; the request names the one the worker
// holds (have_seq), and anything else (its first pull, a restarted worker
// or server, a pull that failed half-way, a recovery) is answered dense,
// with view = values. Sequence numbers start at a random point per server,
// so an answer of a previous server process is never taken for one of this.
//
// Memory: one view (the partition's size in floats) per distinct sequence
// that some worker holds. Workers that hold the same view and pull the same
// values share the answer and the view: in sync mode every worker pulls the
// same step, so a partition costs about two views (the step's and, until
// the last worker pulled, the previous) the values last answered (kept to
// recognise them) and three scratch vectors, whatever
// the worker count; in async and ssp modes, up to one view per worker.
//
// Not in checkpoints: after a resume every worker's first pull is dense.
//
// Threads: the partition's shard thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "comm/transport/buffer.h"
#include "comm/transport/messages.h"
#include "src/common/tensor_memory.h"

namespace pstrain {

class PullDeltas {
 public:
  // `workers`: the job's; `n`: the partition's elements; `density`: the
  // share of the elements a compressed answer sends, in (0, 1].
  PullDeltas(int workers, int64_t n, double density);

  // The answer to `request` (accept_delta, worker checked by the caller to
  // be in [0, workers)) for the partition's `values` (n floats) at `clock`.
  std::pair<PullReply, Payload> Answer(const PullRequest& request, int64_t clock,
                                       const std::shared_ptr<const FloatBuffer>& values);

  // For logs and tests: answers so far, dense and compressed, the bytes the
  // compressed ones took, and the views held now.
  int64_t dense_answers() const { return dense_answers_; }
  int64_t delta_answers() const { return delta_answers_; }
  int64_t delta_bytes() const { return delta_bytes_; }
  int64_t views() const;
  // What worker `worker` holds, as this server believes (null: nothing).
  const std::vector<float>* view(int worker) const;

 private:
  struct View {
    uint64_t seq = 0;
    std::vector<float> values;
  };
  // The last answer made: a worker that holds `from` (null: asked for a
  // dense answer) and pulls while the values are still `values` gets the
  // same one.
  struct Answered {
    std::shared_ptr<const View> from;
    std::shared_ptr<const FloatBuffer> values;
    std::shared_ptr<const View> to;
    std::shared_ptr<const std::vector<uint8_t>> message;  // null: dense
  };

  Answered Dense(const std::shared_ptr<const FloatBuffer>& values);
  Answered Delta(const std::shared_ptr<const View>& from,
                 const std::shared_ptr<const FloatBuffer>& values);

  const int64_t n_;
  const double density_;
  std::vector<std::shared_ptr<const View>> held_;  // per worker
  Answered last_;
  std::vector<float> change_;  // scratch: values - view
  std::vector<float> zeros_;   // n zeros: the encoder adds them to change_
  std::vector<float> sample_;  // scratch of MagnitudeQuantile
  uint64_t next_seq_;
  int64_t dense_answers_ = 0;
  int64_t delta_answers_ = 0;
  int64_t delta_bytes_ = 0;
};

}  // namespace pstrain
