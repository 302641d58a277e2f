// pstrain plot: reads the metrics files the nodes append (docs/formats.md, "Metrics files")
// and draws one SVG (or a PNG of it, png_convert.h). The files are untrusted:
// every line is parsed and checked before it is used, and what one file may
// cost is capped. Drawing is svg_chart's job; this file reads, validates and
// picks the panels.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "src/app/commands.h"
#include "src/app/plot/png_convert.h"
#include "src/app/plot/svg_chart.h"
#include "src/common/status.h"

namespace pstrain {
namespace {

using Json = nlohmann::json;

constexpr std::size_t kMaxFiles = 4096;
constexpr long long kMaxFileBytes = 1LL << 30;
constexpr std::size_t kMaxLines = 4'000'000;
constexpr std::size_t kMaxLineBytes = 64 << 10;  // a metrics line is ~400 bytes
constexpr std::size_t kMaxPointsPerCurve = 2000;
constexpr int kMaxRank = 1 << 20;

struct StepLine {
  double step, elapsed_s, loss, samples_per_s;  // loss, samples/s: NaN for null
};
struct EpochLine {
  double step, elapsed_s, metric;
};

// The last run of one worker's file (a restarted node appends a new run).
struct WorkerRun {
  int rank = -1;
  std::string path;
  std::vector<StepLine> steps;
  std::vector<EpochLine> epochs;
  std::string metric_name;
};

// What one file held: a worker's last run, or a server's updates (its
// running total) against wall time in its last run, or nothing.
struct FileContent {
  std::string role;
  int rank = -1;
  WorkerRun run;
  std::vector<ChartPoint> server_updates;
};

Status LineError(const std::string& path, std::size_t line, const std::string& what) {
  return InvalidArgument(path + ":" + std::to_string(line) + ": " + what);
}

// A finite number at `key`, or NaN when `null_ok` and the value is null.
StatusOr<double> Number(const Json& obj, const char* key, bool null_ok) {
  const auto it = obj.find(key);
  if (it == obj.end()) return InvalidArgument(std::string("\"") + key + "\" is missing");
  if (it->is_null() && null_ok) return double(NAN);
  if (!it->is_number()) return InvalidArgument(std::string("\"") + key + "\" is not a number");
  const double v = it->get<double>();
  if (!std::isfinite(v)) return InvalidArgument(std::string("\"") + key + "\" is not finite");
  return v;
}

StatusOr<std::string> Text(const Json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end()) return InvalidArgument(std::string("\"") + key + "\" is missing");
  if (!it->is_string()) return InvalidArgument(std::string("\"") + key + "\" is not a string");
  return it->get<std::string>();
}

// nlohmann's message says where and why ("number overflow", "unexpected
// end of input"); its "[json.exception.parse_error.101] " prefix does not.
Status Parse(const std::string& line, Json& out) {
  try {
    out = Json::parse(line);
    return Status::OK();
  } catch (const Json::exception& e) {
    std::string why = e.what();
    const auto bracket = why.find("] ");
    if (why.rfind("[json.exception", 0) == 0 && bracket != std::string::npos) {
      why.erase(0, bracket + 2);
    }
    return InvalidArgument("not valid JSON: " + why);
  }
}

Status ApplyServerLine(const Json& obj, FileContent& content) {
  StatusOr<double> elapsed = Number(obj, "elapsed_s", false);
  if (!elapsed.ok()) return elapsed.status();
  StatusOr<double> updates = Number(obj, "updates", false);
  if (!updates.ok()) return updates.status();
  std::vector<ChartPoint>& points = content.server_updates;
  if (!points.empty() && *elapsed < points.back().x) points.clear();  // restarted
  points.push_back({*elapsed, *updates});
  return Status::OK();
}

// Applies one parsed line to `content`; the caller adds file and line.
Status ApplyLine(const Json& obj, FileContent& content) {
  if (!obj.is_object()) return InvalidArgument("not a JSON object");
  StatusOr<std::string> event = Text(obj, "event");
  if (!event.ok()) return event.status();
  StatusOr<std::string> role = Text(obj, "role");
  if (!role.ok()) return role.status();
  if (*role != "worker" && *role != "server") {
    return InvalidArgument("\"role\" is neither worker nor server");
  }
  StatusOr<double> rank = Number(obj, "rank", false);
  if (!rank.ok()) return rank.status();
  if (*rank < 0 || *rank > kMaxRank || *rank != std::floor(*rank)) {
    return InvalidArgument("\"rank\" is not a rank");
  }
  if (content.rank >= 0 && (content.role != *role || content.rank != int(*rank))) {
    return InvalidArgument("a " + *role + " " + std::to_string(int(*rank)) +
                           " line in the file of " + content.role + " " +
                           std::to_string(content.rank));
  }
  content.role = *role;
  content.rank = int(*rank);
  if (*role == "server") return *event == "server" ? ApplyServerLine(obj, content) : Status::OK();
  if (*event != "step" && *event != "epoch") return Status::OK();  // added later: not drawn
  StatusOr<double> step = Number(obj, "step", false);
  if (!step.ok()) return step.status();
  StatusOr<double> elapsed = Number(obj, "elapsed_s", false);
  if (!elapsed.ok()) return elapsed.status();
  if (*step < 0 || *elapsed < 0) return InvalidArgument("\"step\" or \"elapsed_s\" is negative");

  WorkerRun& run = content.run;
  // A restarted node appends a new run: its clock, and often its step, start
  // over. Only the last run is drawn.
  const bool has_last = !run.steps.empty() || !run.epochs.empty();
  const double last_step = run.steps.empty() ? -1 : run.steps.back().step;
  const double last_epoch_step = run.epochs.empty() ? -1 : run.epochs.back().step;
  const double last_elapsed = std::max(run.steps.empty() ? -1 : run.steps.back().elapsed_s,
                                       run.epochs.empty() ? -1 : run.epochs.back().elapsed_s);
  if (has_last && (*step < std::max(last_step, last_epoch_step) || *elapsed < last_elapsed)) {
    run.steps.clear();
    run.epochs.clear();
  }
  if (*event == "step") {
    StatusOr<double> loss = Number(obj, "loss", true);
    if (!loss.ok()) return loss.status();
    StatusOr<double> samples = Number(obj, "samples_per_s", true);
    if (!samples.ok()) return samples.status();
    run.steps.push_back({*step, *elapsed, *loss, *samples});
    return Status::OK();
  }
  StatusOr<double> metric = Number(obj, "test_metric", true);
  if (!metric.ok()) return metric.status();
  const auto name = obj.find("test_metric_name");
  if (name == obj.end()) return InvalidArgument("\"test_metric_name\" is missing");
  if (!name->is_null() && !name->is_string()) {
    return InvalidArgument("\"test_metric_name\" is not a string or null");
  }
  if (name->is_string() && !std::isnan(*metric)) run.metric_name = name->get<std::string>();
  run.epochs.push_back({*step, *elapsed, *metric});
  return Status::OK();
}

// Reads a whole file line by line with capped line length, line count and
// bytes; a line that fails is an error naming the file and line, except an
// unterminated last line, which a running node may be writing right now.
StatusOr<FileContent> ReadMetricsFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return InvalidArgument(path + ": cannot open: " + std::strerror(errno));
  FileContent content;
  content.run.path = path;
  std::vector<char> buf(1 << 20);
  std::string line;
  std::size_t line_no = 0;
  long long total = 0;
  Status status;
  bool eof = false;
  std::size_t pos = 0, len = 0;
  while (status.ok()) {
    if (pos == len) {
      len = std::fread(buf.data(), 1, buf.size(), f);
      pos = 0;
      if (len == 0) {
        if (std::ferror(f)) status = InvalidArgument(path + ": read failed");
        eof = true;
        break;
      }
      total += static_cast<long long>(len);
      if (total > kMaxFileBytes) {
        status =
            InvalidArgument(path + ": larger than " + std::to_string(kMaxFileBytes >> 20) + " MiB");
        break;
      }
    }
    const char* start = buf.data() + pos;
    const void* nl = std::memchr(start, '\n', len - pos);
    const std::size_t take = nl ? static_cast<const char*>(nl) - start : len - pos;
    line.append(start, take);
    pos += take + (nl ? 1 : 0);
    if (line.size() > kMaxLineBytes) {
      status = LineError(path, line_no + 1,
                         "line longer than " + std::to_string(kMaxLineBytes) + " bytes");
      break;
    }
    if (!nl) continue;
    if (++line_no > kMaxLines) {
      status = InvalidArgument(path + ": more than " + std::to_string(kMaxLines) + " lines");
      break;
    }
    if (line.find_first_not_of(" \t\r") != std::string::npos) {
      Json obj;
      Status s = Parse(line, obj);
      if (s.ok()) s = ApplyLine(obj, content);
      if (!s.ok()) status = LineError(path, line_no, s.message());
    }
    line.clear();
  }
  std::fclose(f);
  if (!status.ok()) return status;
  if (eof && !line.empty()) {
    Json obj;
    FileContent copy = content;
    if (Parse(line, obj).ok() && ApplyLine(obj, copy).ok()) content = std::move(copy);
  }
  return content;
}

std::vector<ChartPoint> Points(const WorkerRun& run, bool by_time, bool loss) {
  std::vector<ChartPoint> points;
  for (const StepLine& s : run.steps) {
    const double y = loss ? s.loss : s.samples_per_s;
    if (!std::isnan(y)) points.push_back({by_time ? s.elapsed_s : s.step, y});
  }
  return Downsample(points, kMaxPointsPerCurve);
}

std::vector<ChartPanel> BuildPanels(const std::vector<WorkerRun>& workers,
                                    const std::map<int, std::vector<ChartPoint>>& servers) {
  std::vector<ChartPanel> panels = {
      {"loss-step", "Loss by step", "step", "loss", {}},
      {"loss-time", "Loss by wall time", "elapsed (s)", "loss", {}},
      {"metric-step", "Test metric by step", "step", "test metric", {}},
      {"throughput-step", "Samples/s by step", "step", "samples/s", {}},
      {"throughput-time", "Samples/s by wall time", "elapsed (s)", "samples/s", {}},
      {"server-updates-time", "Server updates by wall time", "elapsed (s)", "updates received", {}},
  };
  std::string metric_name;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const WorkerRun& w = workers[i];
    const std::string name = "worker-" + std::to_string(w.rank);
    const std::string label = "worker " + std::to_string(w.rank);
    const int color = static_cast<int>(i);
    auto add = [&](ChartPanel& p, std::vector<ChartPoint> pts) {
      if (!pts.empty()) p.series.push_back({p.id + "-" + name, label, color, std::move(pts)});
    };
    add(panels[0], Points(w, false, true));
    add(panels[1], Points(w, true, true));
    std::vector<ChartPoint> metric;
    for (const EpochLine& e : w.epochs) {
      if (!std::isnan(e.metric)) metric.push_back({e.step, e.metric});
    }
    add(panels[2], Downsample(metric, kMaxPointsPerCurve));
    if (metric_name.empty()) metric_name = w.metric_name;
    add(panels[3], Points(w, false, false));
    add(panels[4], Points(w, true, false));
  }
  // Servers after the workers in the palette, so no colour means two nodes.
  int color = static_cast<int>(workers.size());
  for (const auto& [rank, points] : servers) {
    if (points.empty()) continue;
    ChartPanel& p = panels[5];
    p.series.push_back({p.id + "-server-" + std::to_string(rank), "server " + std::to_string(rank),
                        color++, Downsample(points, kMaxPointsPerCurve)});
  }
  if (!metric_name.empty()) {
    panels[2].title = "Test " + metric_name + " by step";
    panels[2].y_label = metric_name;
  }
  // A panel with no curve says nothing (no epoch has ended, or no test set).
  panels.erase(std::remove_if(panels.begin(), panels.end(),
                              [](const ChartPanel& p) { return p.series.empty(); }),
               panels.end());
  return panels;
}

// Temp file in the same directory, then rename: a reader never sees half a
// plot, and a failed write leaves the old one.
Status WriteAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Internal(tmp + ": cannot create: " + std::strerror(errno));
  bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(::fileno(f)) == 0 && ok;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Internal(path + ": cannot write: " + why);
  }
  return Status::OK();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

int RunPlot(const PlotOptions& options) {
  const auto fail = [](const std::string& message, int code) {
    std::fprintf(stderr, "pstrain plot: %s\n", message.c_str());
    return code;
  };
  if (options.metrics_paths.empty()) return fail("no metrics files given", 2);
  if (options.metrics_paths.size() > kMaxFiles) {
    return fail("more than " + std::to_string(kMaxFiles) + " metrics files", 2);
  }
  const bool png = EndsWith(options.out_path, ".png");
  if (!png && !EndsWith(options.out_path, ".svg")) {
    return fail("--out must name a .svg or .png file", 2);
  }
  try {
    std::map<int, WorkerRun> workers;  // by rank, so curves come in rank order
    std::map<int, std::vector<ChartPoint>> servers;
    for (const std::string& path : options.metrics_paths) {
      StatusOr<FileContent> content = ReadMetricsFile(path);
      if (!content.ok()) return fail(content.status().message(), 2);
      if (content->role == "server") {
        if (!servers.emplace(content->rank, std::move(content->server_updates)).second) {
          return fail(
              path + ": another file holds server " + std::to_string(content->rank) + " too", 2);
        }
        continue;
      }
      if (content->role != "worker") continue;
      WorkerRun& run = content->run;
      run.rank = content->rank;
      const auto [it, added] = workers.emplace(run.rank, run);
      if (!added) {
        return fail(
            it->second.path + " and " + path + " both hold worker " + std::to_string(run.rank), 2);
      }
    }
    std::vector<WorkerRun> runs;
    for (auto& [rank, run] : workers) runs.push_back(std::move(run));
    if (std::all_of(runs.begin(), runs.end(), [](const WorkerRun& r) { return r.steps.empty(); })) {
      return fail("no worker step lines in the files given", 2);
    }
    const std::vector<ChartPanel> panels = BuildPanels(runs, servers);
    const auto count = [](std::size_t n, const char* what) {
      return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
    };
    std::string title = "pstrain: " + count(runs.size(), "worker");
    if (!servers.empty()) title += ", " + count(servers.size(), "server");
    const std::string svg = RenderSvgChart(title, panels, 2);
    if (!png) {
      Status written = WriteAtomically(options.out_path, svg);
      if (!written.ok()) return fail(written.message(), 1);
      return 0;
    }
    // PNG: the SVG goes to a temp file beside the output for rsvg-convert.
    const std::string svg_tmp = options.out_path + ".tmp." + std::to_string(::getpid()) + ".svg";
    Status converted = WriteAtomically(svg_tmp, svg);
    if (converted.ok()) converted = ConvertSvgToPng(svg_tmp, options.out_path);
    std::remove(svg_tmp.c_str());
    if (!converted.ok()) return fail(converted.message(), 1);
  } catch (const std::exception& e) {  // out of memory, in practice
    return fail(e.what(), 1);
  }
  return 0;
}

}  // namespace pstrain
