// The metrics file and the ETA text: lines are valid JSON even for a
// diverged loss, a reopened file is appended to, an unwritable directory
// costs one warning and no crash; durations read as a person expects.
#include "roles/node/metrics_log.h"

#include <doctest/doctest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "roles/worker/progress_bar.h"
#include "roles/worker/train_report.h"

namespace pstrain {
namespace {

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("metrics_log_test_" + std::to_string(getpid()));
  ~TempDir() { std::filesystem::remove_all(path); }
};

std::vector<nlohmann::json> ReadLines(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string text; std::getline(in, text);) lines.push_back(nlohmann::json::parse(text));
  return lines;
}

Logger CapturingLogger(std::ostringstream* out) {
  return MakeLoggerWithSinks("test", {std::make_shared<spdlog::sinks::ostream_sink_mt>(*out)});
}

TEST_CASE("lines are appended across reopenings and stay JSON for a non-finite loss") {
  TempDir dir;
  std::ostringstream logged;
  const std::string sub = (dir.path / "made" / "here").string();
  {
    MetricsLog log(sub, "worker", 3, CapturingLogger(&logged));
    REQUIRE(log.enabled());
    nlohmann::ordered_json f;
    f["step"] = 1;
    f["loss"] = std::nan("");
    log.Write("step", f);
  }
  {
    MetricsLog log(sub, "worker", 3, CapturingLogger(&logged));
    nlohmann::ordered_json f;
    f["step"] = 2;
    f["loss"] = 0.5;
    log.Write("step", f);
  }
  CHECK(logged.str().empty());
  auto lines = ReadLines(MetricsLog::PathFor(sub, "worker", 3));
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["event"] == "step");
  CHECK(lines[0]["role"] == "worker");
  CHECK(lines[0]["rank"] == 3);
  CHECK(lines[0]["loss"].is_null());
  CHECK(lines[0]["elapsed_s"].get<double>() >= 0);
  CHECK(lines[1]["step"] == 2);
  CHECK(lines[1]["time"].get<double>() >= lines[0]["time"].get<double>());
}

TEST_CASE(
    "a worker's step line carries the gradient norm and the steps clipped only when it clips") {
  TempDir dir;
  std::ostringstream logged;
  {
    TrainReport report(dir.path.string(), 0, CapturingLogger(&logged), false, 0, 100);
    TrainCounters counters;
    report.WriteStep(10, 1, 0.5, 0.1, counters);  // not clipping
    counters.grad_norm = 2.5;
    counters.clipped_steps = 4;
    report.WriteStep(20, 1, 0.5, 0.1, counters);
    counters.grad_norm = 0.75;
    counters.clipped_steps = 7;
    report.WriteStep(30, 1, 0.5, 0.1, counters);
  }
  auto lines = ReadLines(MetricsLog::PathFor(dir.path.string(), "worker", 0));
  REQUIRE(lines.size() == 3);
  CHECK_FALSE(lines[0].contains("grad_norm"));
  CHECK(lines[1]["grad_norm"] == 2.5);
  CHECK(lines[1]["clipped_steps"] == 4);
  CHECK(lines[2]["grad_norm"] == 0.75);
  CHECK(lines[2]["clipped_steps"] == 3);  // of the interval
}

TEST_CASE("a directory that cannot be made costs one warning, and writes do nothing") {
  TempDir dir;
  std::filesystem::create_directories(dir.path);
  const std::string file = (dir.path / "a-file").string();
  std::ofstream(file) << "x";
  std::ostringstream logged;
  MetricsLog log(file + "/sub", "server", 0, CapturingLogger(&logged));
  CHECK_FALSE(log.enabled());
  log.Write("server", nlohmann::ordered_json{{"updates", 1}});
  const std::string text = logged.str();
  CHECK(text.find("no metrics file") != std::string::npos);
  CHECK(text.find(file) != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
}

TEST_CASE("durations and ETAs read as a person expects") {
  CHECK(FormatDuration(0) == "0s");
  CHECK(FormatDuration(59.4) == "59s");
  CHECK(FormatDuration(83) == "1m23s");
  CHECK(FormatDuration(3600 + 5 * 60 + 9) == "1h05m");
  CHECK(FormatDuration(2 * 86400 + 3 * 3600) == "2d03h");
  CHECK(FormatDuration(-1) == "?");
  CHECK(FormatDuration(std::numeric_limits<double>::infinity()) == "?");
  CHECK(EtaSeconds(100, 0.5) == doctest::Approx(50));
  CHECK(EtaSeconds(100, 0) == -1);  // no step timed yet
  CHECK(ProgressBar::Render(32, 128, 2100.4, 3) ==
        "[#####---------------]  25% 32/128 2100 samples/s ETA 3s");
  CHECK(ProgressBar::Render(128, 128, 10, 0).rfind("[####################] 100% 128/128", 0) == 0);
}

TEST_CASE("no bar on a stream that is not a terminal") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  ProgressBar bar(f);
  CHECK_FALSE(bar.active());
  bar.Update(1, 2, 10, 1);
  bar.Finish();
  CHECK(std::ftell(f) == 0);
  std::fclose(f);
}

}  // namespace
}  // namespace pstrain
