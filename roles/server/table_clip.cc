// TableHost's part of clipping by the global norm (train.clip_norm,
// roles/server/update_core.h): a sync step held once every worker's rows
// are in, its squared norm for the workers' norm pulls, and the factor
// that applies it.
#include <fmt/format.h>

#include "roles/server/table_host.h"

namespace pstrain {

void TableHost::NoteHeld(HostedTable& t, int64_t step) {
  if (!t.core.holding() || t.norm_step == step) return;
  SumGathered(t, 1.0f / static_cast<float>(t.core.member_count()));
  double squares = 0;
  for (float g : t.step_grads) squares += static_cast<double>(g) * g;
  t.norm_step = step;
  t.squared_norm = squares;
  t.clipped_by = 0;
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
                        if (step != t.norm_step)
                          return reply(ErrorReply{HeldStepMismatch(step, t.name, t.norm_step)}, {});
                        SparsePullReply answer{t.core.clock()};
                        answer.squared_norm = t.squared_norm;
                        reply(answer, {});
                      });
}

void TableHost::TakeClip(HostedTable& t, const SparsePushRequest& request, const Reply& reply) {
  if (!(config_.train.clip_norm > 0))
    return reply(ErrorReply{fmt::format("clip factor for table '{}': this server's config sets "
                                        "no train.clip_norm",
                                        request.table)},
                 {});
  if (request.clock == t.norm_step && t.clipped_by > 0) {
    if (request.clip == t.clipped_by) return reply(Ack{}, {});
    return reply(ErrorReply{fmt::format("a clip factor of {} for step {} of {}, which was clipped "
                                        "by {}: the workers disagree on the global norm",
                                        request.clip, request.clock, t.name, t.clipped_by)},
                 {});
  }
  const int64_t before = t.core.clock();
  Status st =
      t.core.ApplyHeld(request.clock, t.name, [&](float) { return ApplySummed(t, request.clip); });
  if (t.core.clock() > before) t.clipped_by = request.clip;  // counted applied, even if it failed
  reply(st.ok() ? MessageBody(Ack{}) : MessageBody(ErrorReply{st.message()}), {});
  // As after a push: the clock moved, whatever the update's fate, and
  // what waits for it (pulls, checkpoints) goes on.
  t.core.AnswerReady();
  AfterPush(t);
}

}  // namespace pstrain
