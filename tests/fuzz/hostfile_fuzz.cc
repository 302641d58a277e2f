// pstrain launch reads a hostfile (src/app/launcher/plan.h) and hands each
// host to ssh as an argument. Input: the file's bytes. Beyond the
// sanitizers: a plan holds the scheduler first, then servers and workers
// with ranks 0.. in order, counts that match, at least one worker, and only
// hosts CheckLaunchHost accepts (none that ssh could read as an option); an
// error is one non-empty line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "src/app/launcher/plan.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using pstrain::Role;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto plan = pstrain::PlanFromHostfile(text, "hosts", "");
  if (!plan.ok()) {
    const std::string m = plan.status().message();
    if (m.empty() || m.find('\n') != std::string::npos)
      pstrain::fuzz::Fail("error not one line", m);
    return 0;
  }
  if (plan->nodes.empty() || plan->nodes[0].role != Role::kScheduler)
    pstrain::fuzz::Fail("no scheduler first");
  if (plan->workers < 1) pstrain::fuzz::Fail("no worker");
  if (plan->nodes.size() != static_cast<size_t>(1 + plan->servers + plan->workers))
    pstrain::fuzz::Fail("counts differ from nodes");
  int next[3] = {0, 0, 0};
  for (const pstrain::LaunchNode& node : plan->nodes) {
    if (!pstrain::CheckLaunchHost(node.host).ok()) pstrain::fuzz::Fail("bad host", node.host);
    int& expected = next[static_cast<int>(node.role)];
    if (node.rank != expected) pstrain::fuzz::Fail("ranks out of order");
    ++expected;
    if (node.role == Role::kServer && next[2] > 0) pstrain::fuzz::Fail("server after a worker");
  }
  return 0;
}
