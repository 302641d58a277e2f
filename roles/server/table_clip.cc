// TableHost's part of clipping by the global norm (train.clip_norm,
// roles/server/update_core.h): a sync step held once every worker's rows
// are in, its squared norm for the workers' norm pulls, and the factor
// that applies it.
#include <fmt/format.h>

#include "roles/server/table_host.h"

namespace pstrain {

void TableHost::NoteHeld(HostedTable& t) {
  if (!t.core.holding() || t.core.NormNoted()) return;
  SumGathered(t, 1.0f / static_cast<float>(t.core.member_count()));
  double squares = 0;
  for (float g : t.step_grads) squares += static_cast<double>(g) * g;
  t.core.NoteHeldNorm(squares);
}

void TableHost::PullNorm(HostedTable& t, const SparsePullRequest& request, const Reply& reply) {
  if (!(config_.train.clip_norm > 0))
    return reply(ErrorReply{fmt::format("norm pull of table '{}': this server's config sets no "
                                        "train.clip_norm",
                                        request.table)},
                 {});
  t.core.AnswerHeldAt(request.min_clock,
                      [&t, step = request.min_clock, reply](const std::string* refused) {
                        if (refused != nullptr) return reply(ErrorReply{*refused}, {});
                        StatusOr<double> squares = t.core.HeldNorm(step, t.name);
                        if (!squares.ok()) return reply(ErrorReply{squares.status().message()}, {});
                        SparsePullReply answer{t.core.clock()};
                        answer.squared_norm = *squares;
                        reply(answer, {});
                      });
}

void TableHost::TakeClip(HostedTable& t, const SparsePushRequest& request, const Reply& reply) {
  if (!(config_.train.clip_norm > 0))
    return reply(ErrorReply{fmt::format("clip factor for table '{}': this server's config sets "
                                        "no train.clip_norm",
                                        request.table)},
                 {});
  Status st = t.core.ApplyHeld(request.clock, request.clip, t.name,
                               [&](float) { return ApplySummed(t, request.clip); });
  reply(st.ok() ? MessageBody(Ack{}) : MessageBody(ErrorReply{st.message()}), {});
  // As after a push: the clock moved, whatever the update's fate, and
  // what waits for it (pulls, checkpoints) goes on.
  t.core.AnswerReady();
  AfterPush(t);
}

}  // namespace pstrain
