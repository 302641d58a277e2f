// pstrain scale: asks a running elastic job's scheduler for a new shape
// (roles/scheduler/elastic.cc) and prints its answer.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "comm/transport/completion.h"
#include "comm/transport/connection.h"
#include "comm/transport/event_loop.h"
#include "comm/transport/security.h"
#include "comm/transport/tls.h"
#include "src/app/commands.h"
#include "src/common/logging.h"

namespace pstrain {

namespace {

// The scheduler's one-line answer, or why there is none.
StatusOr<std::string> AskScheduler(const ScaleOptions& options) {
  const ClusterOptions& c = options.cluster;
  EventLoop loop;
  loop.SetSecurity(SecurityFrom(c));
  auto tls = TlsContext::LoadIfSet(c.tls);
  if (!tls.ok()) return tls.status();
  loop.set_tls(std::move(*tls));
  PSTRAIN_RETURN_IF_ERROR(loop.Start());
  Logger log = MakeLogger("scale");
  Completion<StatusOr<std::string>> answer;
  const std::string where = fmt::format("the scheduler at {}:{}", c.sched_host, c.sched_port);
  loop.Post([&loop, log, &c, options, answer, where] {
    Connection::Connect(&loop, log, c.sched_host, c.sched_port,
                        [options, answer, where](StatusOr<Connection::Ptr> conn) {
                          if (!conn.ok()) return answer.Set(conn.status().WithContext(where));
                          (*conn)->Start(nullptr, nullptr);
                          (*conn)->Call(
                              ScaleRequest{options.workers, options.servers},
                              [answer, where, conn = *conn](StatusOr<Incoming> reply) {
                                conn->Close(Aborted("done"));
                                if (!reply.ok())
                                  return answer.Set(reply.status().WithContext(where));
                                if (auto* r = std::get_if<ScaleReply>(&reply->message.body))
                                  return answer.Set(r->message);
                                answer.Set(InvalidArgument(fmt::format(
                                    "{} answered {}", where, MessageName(reply->message.body))));
                              });
                        });
  });
  const double wait_s = c.connect_timeout_s + c.handshake_timeout_s;
  auto got = answer.WaitFor(std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000)));
  loop.Stop().IgnoreError();
  if (!got) return DeadlineExceeded(fmt::format("{} did not answer within {} s", where, wait_s));
  return *got;
}

}  // namespace

int RunScale(const ScaleOptions& options) {
  auto answer = AskScheduler(options);
  if (!answer.ok()) {
    std::fprintf(stderr, "pstrain scale: %s\n", answer.status().message().c_str());
    return 1;
  }
  std::printf("%s\n", answer->c_str());
  return 0;
}

}  // namespace pstrain
