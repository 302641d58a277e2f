// Log labels: a node's lines say which role and rank wrote them, and the
// label a node gets when it registers reaches every copy of its logger.
#include "src/common/logging.h"

#include <doctest/doctest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <atomic>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace pstrain {
namespace {

TEST_CASE("a formatted line carries the label, and relabelling reaches copies") {
  std::ostringstream out;
  Logger log =
      MakeLoggerWithSinks("worker", {std::make_shared<spdlog::sinks::ostream_sink_mt>(out)});
  Logger copy = log;  // as a component holding the node's logger has
  copy->info("connecting");
  SetLogLabel(log, "worker 1");
  copy->info("training");
  std::string text = out.str();
  CHECK(text.find("] [worker] [info] connecting\n") != std::string::npos);
  CHECK(text.find("] [worker 1] [info] training\n") != std::string::npos);
}

TEST_CASE("MakeLogger relabels its extra sinks too") {
  auto sink = std::make_shared<testing::CaptureSink>();
  Logger log = MakeLogger("server", {sink});
  SetLogLabel(log, "server 0");
  log->info("holds 3 partitions");
  CHECK(sink->Matching("[server 0] holds 3 partitions").size() == 1);
}

TEST_CASE("relabelling while other threads log loses and tears no line") {
  auto sink = std::make_shared<testing::CaptureSink>();
  Logger log = testing::CaptureLogger("worker", sink);
  constexpr int kThreads = 4, kLines = 500;
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, copy = log] {
      started.fetch_add(1);
      for (int i = 0; i < kLines; ++i) copy->info("step {}", i);
    });
  while (started.load() < kThreads) std::this_thread::yield();
  SetLogLabel(log, "worker 12");
  for (std::thread& t : threads) t.join();
  log->info("done");
  std::vector<std::string> lines = sink->Lines();
  CHECK(lines.size() == kThreads * kLines + 1);
  for (const std::string& line : lines) {
    bool whole = line.rfind("[worker] step ", 0) == 0 || line.rfind("[worker 12] step ", 0) == 0;
    if (!whole) CHECK(line == "[worker 12] done");
  }
  CHECK(lines.back() == "[worker 12] done");
}

}  // namespace
}  // namespace pstrain
