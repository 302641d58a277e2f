// A grid of line charts as one self-contained SVG 1.1 document: no scripts,
// no external references, every text and attribute escaped. Knows nothing of
// metrics; `pstrain plot` (plot_cmd.cc) fills the panels.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pstrain {

struct ChartPoint {
  double x = 0;
  double y = 0;
};

// One curve. `id` becomes the polyline's id (the caller keeps ids unique and
// made of [A-Za-z0-9_-]); `color_index` picks the palette entry, so the same
// series has the same colour in every panel.
struct ChartSeries {
  std::string id;
  std::string label;
  int color_index = 0;
  std::vector<ChartPoint> points;  // finite values, in drawing order
};

struct ChartPanel {
  std::string id;  // the panel's <g> id
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<ChartSeries> series;
};

// Round tick values ("nice": 1, 2 or 5 times a power of ten) covering
// [lo, hi] with about `target` ticks; the first is <= lo and the last >= hi.
// A degenerate or non-finite range is widened so there are always >= 2 ticks.
std::vector<double> NiceTicks(double lo, double hi, int target);

// A tick label: as many decimals as the tick spacing needs, no "-0".
std::string FormatTick(double value, double spacing);

// Text safe inside XML character data and double-quoted attributes; drops
// characters XML 1.0 forbids (control characters, invalid UTF-8 bytes).
std::string EscapeXml(std::string_view text);

// At most `max_points` points keeping the curve's shape: the points are cut
// into buckets by position and each bucket keeps its lowest and highest
// point (in their order), so spikes survive. First and last are kept.
std::vector<ChartPoint> Downsample(const std::vector<ChartPoint>& points, std::size_t max_points);

// The document: `title` on top, the panels in a grid `columns` wide.
std::string RenderSvgChart(const std::string& title, const std::vector<ChartPanel>& panels,
                           int columns);

}  // namespace pstrain
