#include "src/app/plot/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace pstrain {
namespace {

constexpr int kPanelWidth = 480;
constexpr int kPanelHeight = 320;
constexpr int kLeft = 72;  // room for y tick labels and the y label
constexpr int kRight = 18;
constexpr int kTop = 34;  // the panel title
constexpr int kBottom = 50;
constexpr int kHeader = 36;
constexpr int kLegendItemWidth = 120;
constexpr int kLegendRowHeight = 20;
constexpr int kMaxTicks = 64;

// Tableau 10: distinguishable, and still readable printed in grey.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

std::string Fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

const char* Color(int index) {
  const int n = static_cast<int>(sizeof kPalette / sizeof kPalette[0]);
  return kPalette[((index % n) + n) % n];
}

// Length of the valid UTF-8 sequence XML allows at s[i], or 0.
std::size_t Utf8Length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  // U+FFFE and U+FFFF are not XML characters.
  if (len == 3 && c == 0xEF && b(i + 1) == 0xBF && b(i + 2) >= 0xBE) return 0;
  return len;
}

struct Frame {  // one panel's plot area in document coordinates
  double left, top, width, height;
  double x_lo, x_hi, y_lo, y_hi;
  double X(double x) const { return left + (x - x_lo) / (x_hi - x_lo) * width; }
  double Y(double y) const { return top + height - (y - y_lo) / (y_hi - y_lo) * height; }
};

void AxisRange(const ChartPanel& panel, bool x_axis, double* lo, double* hi) {
  *lo = INFINITY;
  *hi = -INFINITY;
  for (const ChartSeries& s : panel.series) {
    for (const ChartPoint& p : s.points) {
      const double v = x_axis ? p.x : p.y;
      if (!std::isfinite(v)) continue;
      *lo = std::min(*lo, v);
      *hi = std::max(*hi, v);
    }
  }
}

void Text(std::string& out, double x, double y, const char* anchor, const std::string& text,
          const std::string& extra = "") {
  out += "<text x=\"" + Fixed(x) + "\" y=\"" + Fixed(y) + "\" text-anchor=\"" + anchor + "\"" +
         extra + ">" + EscapeXml(text) + "</text>\n";
}

void RenderAxes(std::string& out, const Frame& f, const std::vector<double>& xt,
                const std::vector<double>& yt) {
  const double xs = xt.size() > 1 ? xt[1] - xt[0] : 1, ys = yt.size() > 1 ? yt[1] - yt[0] : 1;
  out += "<g class=\"grid\" stroke=\"#e0e0e0\" stroke-width=\"1\">\n";
  for (double t : xt) {
    const std::string x = Fixed(f.X(t));
    out += "<line x1=\"" + x + "\" y1=\"" + Fixed(f.top) + "\" x2=\"" + x + "\" y2=\"" +
           Fixed(f.top + f.height) + "\"/>\n";
  }
  for (double t : yt) {
    const std::string y = Fixed(f.Y(t));
    out += "<line x1=\"" + Fixed(f.left) + "\" y1=\"" + y + "\" x2=\"" + Fixed(f.left + f.width) +
           "\" y2=\"" + y + "\"/>\n";
  }
  out += "</g>\n<rect x=\"" + Fixed(f.left) + "\" y=\"" + Fixed(f.top) + "\" width=\"" +
         Fixed(f.width) + "\" height=\"" + Fixed(f.height) +
         "\" fill=\"none\" stroke=\"#444\" stroke-width=\"1\"/>\n";
  out += "<g class=\"ticks\" fill=\"#333\" font-size=\"11\">\n";
  for (double t : xt) Text(out, f.X(t), f.top + f.height + 15, "middle", FormatTick(t, xs));
  for (double t : yt) Text(out, f.left - 6, f.Y(t) + 4, "end", FormatTick(t, ys));
  out += "</g>\n";
}

void RenderSeries(std::string& out, const Frame& f, const ChartSeries& s) {
  const std::string color = Color(s.color_index);
  out += "<polyline id=\"" + EscapeXml(s.id) + "\" class=\"series\" fill=\"none\" stroke=\"" +
         color + "\" stroke-width=\"1.5\" stroke-linejoin=\"round\" points=\"";
  for (std::size_t i = 0; i < s.points.size(); ++i) {
    if (i) out += ' ';
    out += Fixed(f.X(s.points[i].x)) + "," + Fixed(f.Y(s.points[i].y));
  }
  out += "\"><title>" + EscapeXml(s.label) + "</title></polyline>\n";
  // A few points (epoch ends) get markers: one point alone draws no line.
  if (s.points.size() <= 50) {
    for (const ChartPoint& p : s.points) {
      out += "<circle cx=\"" + Fixed(f.X(p.x)) + "\" cy=\"" + Fixed(f.Y(p.y)) +
             "\" r=\"2.5\" fill=\"" + color + "\"/>\n";
    }
  }
}

void RenderPanel(std::string& out, const ChartPanel& panel, double left, double top) {
  Frame f{left + kLeft,
          top + kTop,
          double(kPanelWidth - kLeft - kRight),
          double(kPanelHeight - kTop - kBottom),
          0,
          1,
          0,
          1};
  double lo, hi;
  AxisRange(panel, true, &lo, &hi);
  const std::vector<double> xt = NiceTicks(lo, hi, 6);
  AxisRange(panel, false, &lo, &hi);
  const std::vector<double> yt = NiceTicks(lo, hi, 5);
  f.x_lo = xt.front();
  f.x_hi = xt.back();
  f.y_lo = yt.front();
  f.y_hi = yt.back();

  out += "<g id=\"" + EscapeXml(panel.id) + "\" class=\"panel\">\n";
  Text(out, left + kPanelWidth / 2.0, top + 20, "middle", panel.title,
       " font-size=\"14\" font-weight=\"bold\"");
  RenderAxes(out, f, xt, yt);
  Text(out, f.left + f.width / 2, top + kPanelHeight - 12, "middle", panel.x_label);
  const double yx = left + 16, yy = f.top + f.height / 2;
  Text(out, yx, yy, "middle", panel.y_label,
       " transform=\"rotate(-90 " + Fixed(yx) + " " + Fixed(yy) + ")\"");
  for (const ChartSeries& s : panel.series) RenderSeries(out, f, s);
  out += "</g>\n";
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (lo > hi) std::swap(lo, hi);
  const double scale = std::max({1.0, std::fabs(lo), std::fabs(hi)});
  if (hi - lo <= scale * 1e-12) {  // one value: centre it
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  if (!std::isfinite(hi - lo)) return {lo, hi};  // near DBL_MAX: no room for rounding
  target = std::clamp(target, 2, 20);
  const double raw = (hi - lo) / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / magnitude;
  const double step = (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * magnitude;
  const double start = std::floor(lo / step) * step;
  const long n = std::lround(std::ceil(hi / step) - std::floor(lo / step));
  std::vector<double> ticks;
  for (long i = 0; i <= std::clamp(n, 1L, long(kMaxTicks)); ++i) {
    const double t = start + double(i) * step;
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::string FormatTick(double value, double spacing) {
  char buf[40];
  if (spacing > 0 && std::fabs(value) < spacing * 1e-9) value = 0;  // never "-0"
  const int decimals = spacing > 0 ? std::max(0, int(-std::floor(std::log10(spacing) + 1e-9))) : 0;
  if (std::fabs(value) >= 1e7 || decimals > 6) {
    std::snprintf(buf, sizeof buf, "%.4g", value);
  } else {
    std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  }
  return buf;
}

std::string EscapeXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t len = Utf8Length(text, i);
      if (len == 0) {
        ++i;  // not UTF-8: dropped
      } else {
        out.append(text.substr(i, len));
        i += len;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if (c >= 0x20 || c == '\t' || c == '\n' || c == '\r') out += char(c);
    }
  }
  return out;
}

std::vector<ChartPoint> Downsample(const std::vector<ChartPoint>& points, std::size_t max_points) {
  max_points = std::max<std::size_t>(max_points, 4);
  if (points.size() <= max_points) return points;
  std::vector<ChartPoint> out;
  out.push_back(points.front());
  const std::size_t inner = points.size() - 2, buckets = (max_points - 2) / 2;
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t begin = 1 + inner * b / buckets, end = 1 + inner * (b + 1) / buckets;
    if (begin >= end) continue;
    std::size_t lo = begin, hi = begin;
    for (std::size_t i = begin; i < end; ++i) {
      if (points[i].y < points[lo].y) lo = i;
      if (points[i].y > points[hi].y) hi = i;
    }
    out.push_back(points[std::min(lo, hi)]);
    if (lo != hi) out.push_back(points[std::max(lo, hi)]);
  }
  out.push_back(points.back());
  return out;
}

std::string RenderSvgChart(const std::string& title, const std::vector<ChartPanel>& panels,
                           int columns) {
  columns = std::clamp(columns, 1, 8);
  const int n = static_cast<int>(panels.size());
  const int rows = (n + columns - 1) / columns;
  const int width = columns * kPanelWidth;

  // One legend for all panels: a series has the same colour everywhere.
  std::vector<std::pair<std::string, int>> legend;
  for (const ChartPanel& p : panels) {
    for (const ChartSeries& s : p.series) {
      const std::pair<std::string, int> item{s.label, s.color_index};
      if (std::find(legend.begin(), legend.end(), item) == legend.end()) legend.push_back(item);
    }
  }
  const int per_row = std::max(1, (width - 20) / kLegendItemWidth);
  const int legend_rows = (static_cast<int>(legend.size()) + per_row - 1) / per_row;
  const int legend_top = kHeader;
  const int grid_top = legend_top + legend_rows * kLegendRowHeight + 6;
  const int height = grid_top + rows * kPanelHeight;

  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" +
         std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
         std::to_string(width) + " " + std::to_string(height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out += "<title>" + EscapeXml(title) + "</title>\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  Text(out, width / 2.0, 24, "middle", title, " font-size=\"16\" font-weight=\"bold\"");
  out += "<g id=\"legend\">\n";
  for (std::size_t i = 0; i < legend.size(); ++i) {
    const double x = 20 + double(i % per_row) * kLegendItemWidth;
    const double y = legend_top + double(i / per_row) * kLegendRowHeight + 10;
    out += "<g class=\"legend-item\"><line x1=\"" + Fixed(x) + "\" y1=\"" + Fixed(y) + "\" x2=\"" +
           Fixed(x + 24) + "\" y2=\"" + Fixed(y) + "\" stroke=\"" + Color(legend[i].second) +
           "\" stroke-width=\"3\"/>";
    Text(out, x + 30, y + 4, "start", legend[i].first);
    out += "</g>\n";
  }
  out += "</g>\n";
  for (int i = 0; i < n; ++i) {
    RenderPanel(out, panels[i], double(i % columns) * kPanelWidth,
                grid_top + double(i / columns) * kPanelHeight);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace pstrain
