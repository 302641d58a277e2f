// The doctest main of every test binary, with one option of its own for the
// suites that need something a machine may lack (tests/test_util.h):
//   binary --run-suite=NAME   runs only suite NAME, or, when what it needs is
//                             missing here, prints why and exits 77 (CTest's
//                             skip code: the test shows as skipped, not passed);
//   binary [doctest options]  runs everything else, leaving those suites out.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/open_files.h"
#include "tests/test_util.h"

namespace {

constexpr int kSkipped = 77;
constexpr std::string_view kRunSuite = "--run-suite=";

}  // namespace

int main(int argc, char** argv) {
  // As in pstrain's own main(): nodes run in-process here, and a write to a
  // socket a peer reset must fail, not end the test binary.
  std::signal(SIGPIPE, SIG_IGN);
  // As there too: a job of hundreds of in-process nodes holds thousands of
  // descriptors.
  pstrain::RaiseOpenFileLimit();
  std::string suite;
  std::vector<char*> doctest_args;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.substr(0, kRunSuite.size()) == kRunSuite) {
      suite = std::string(arg.substr(kRunSuite.size()));
    } else {
      doctest_args.push_back(argv[i]);
    }
  }
  doctest::Context context(static_cast<int>(doctest_args.size()), doctest_args.data());
  const auto& suites = pstrain::testing::SuitesWithNeeds();
  if (suite.empty()) {
    for (const auto& entry : suites) context.addFilter("test-suite-exclude", entry.first.c_str());
    return context.run();
  }
  const auto found = suites.find(suite);
  if (found == suites.end()) {
    std::fprintf(stderr, "%s%s: this binary has no such suite\n", kRunSuite.data(), suite.c_str());
    return 2;
  }
  const pstrain::Status can_run = found->second();
  if (!can_run.ok()) {
    std::printf("skipped: suite %s: %s\n", suite.c_str(), can_run.message().c_str());
    return kSkipped;
  }
  context.addFilter("test-suite", suite.c_str());
  return context.run();
}
