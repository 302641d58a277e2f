// The SVG charts of `pstrain plot`: ticks a reader can read, text that cannot
// break the document, and long curves cut down without losing their spikes.
#include "src/app/plot/svg_chart.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

namespace pstrain {
namespace {

bool IsNice(double spacing) {
  const double m = spacing / std::pow(10.0, std::floor(std::log10(spacing)));
  return std::fabs(m - 1) < 1e-9 || std::fabs(m - 2) < 1e-9 || std::fabs(m - 5) < 1e-9 ||
         std::fabs(m - 10) < 1e-9;
}

TEST_CASE("ticks are round, evenly spaced and cover the data") {
  struct Case {
    double lo, hi;
  };
  for (const Case c : {Case{0, 1}, Case{0.013, 0.987}, Case{-3.7, 12.2}, Case{1e6, 3.3e6},
                       Case{2.3001, 2.3009}, Case{0, 200}, Case{-0.5, -0.1}}) {
    CAPTURE(c.lo);
    CAPTURE(c.hi);
    const std::vector<double> t = NiceTicks(c.lo, c.hi, 5);
    REQUIRE(t.size() >= 2);
    CHECK(t.size() <= 12);
    CHECK(t.front() <= c.lo);
    CHECK(t.back() >= c.hi);
    const double spacing = t[1] - t[0];
    CHECK(IsNice(spacing));
    for (std::size_t i = 1; i < t.size(); ++i) {
      CHECK(t[i] - t[i - 1] == doctest::Approx(spacing).epsilon(1e-9));
    }
  }
  CHECK(NiceTicks(0, 200, 5) == std::vector<double>{0, 50, 100, 150, 200});
}

TEST_CASE("a single value or a non-finite range still gets an axis") {
  for (double v : {0.0, 5.0, -2.0, 1e9}) {
    const std::vector<double> t = NiceTicks(v, v, 5);
    REQUIRE(t.size() >= 2);
    CHECK(t.front() < v);
    CHECK(t.back() > v);
  }
  CHECK(NiceTicks(NAN, INFINITY, 5).size() >= 2);
}

TEST_CASE("tick labels show the decimals the spacing needs, never -0") {
  CHECK(FormatTick(0.30000000000000004, 0.1) == "0.3");
  CHECK(FormatTick(150, 50) == "150");
  CHECK(FormatTick(-1e-17, 0.5) == "0.0");
  CHECK(FormatTick(2.3005, 0.0002) == "2.3005");
  CHECK(FormatTick(3e9, 1e9) == "3e+09");
}

TEST_CASE("escaping leaves no markup, no control characters and no broken UTF-8") {
  CHECK(EscapeXml("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
  CHECK(EscapeXml("]]><script>x</script>") == "]]&gt;&lt;script&gt;x&lt;/script&gt;");
  CHECK(EscapeXml(std::string("a\x01\x1b"
                              "b\tc",
                              6)) == "ab\tc");
  CHECK(EscapeXml("caf\xc3\xa9") == "caf\xc3\xa9");        // kept
  CHECK(EscapeXml("x\xff\xc3(y\xed\xa0\x80z") == "x(yz");  // invalid, surrogate
  CHECK(EscapeXml("\xef\xbf\xbe!") == "!");                // U+FFFE
}

TEST_CASE("a hostile label and id stay text in the rendered document") {
  ChartPanel panel{"p", "<title>&", "x", "y", {}};
  panel.series.push_back(
      {"s\"><script>", "worker </text><script>alert(1)</script>", 0, {{0, 1}, {1, 2}}});
  const std::string svg = RenderSvgChart("t\"", {panel}, 2);
  CHECK(svg.find("<script") == std::string::npos);
  CHECK(svg.find("&lt;script&gt;") != std::string::npos);
  CHECK(svg.find("href") == std::string::npos);  // nothing external
}

TEST_CASE("downsampling caps the points and keeps ends and spikes") {
  std::vector<ChartPoint> points;
  for (int i = 0; i < 100000; ++i) points.push_back({double(i), std::sin(i / 1000.0)});
  points[54321].y = 50;   // a spike
  points[77777].y = -50;  // a dip
  const std::vector<ChartPoint> out = Downsample(points, 2000);
  CHECK(out.size() <= 2000);
  CHECK(out.size() >= 1000);
  CHECK(out.front().x == 0);
  CHECK(out.back().x == 99999);
  bool spike = false, dip = false;
  for (std::size_t i = 0; i < out.size(); ++i) {
    spike |= out[i].y == 50;
    dip |= out[i].y == -50;
    if (i) CHECK(out[i].x > out[i - 1].x);  // still in order
  }
  CHECK(spike);
  CHECK(dip);
  // Short curves are left alone.
  const std::vector<ChartPoint> few = {{0, 1}, {1, 3}, {2, 2}};
  CHECK(Downsample(few, 2000).size() == 3);
}

TEST_CASE("each series becomes one polyline with its id inside its panel's group") {
  ChartPanel a{"loss-step", "Loss", "step", "loss", {}};
  a.series.push_back({"loss-step-worker-0", "worker 0", 0, {{0, 2}, {10, 1}}});
  a.series.push_back({"loss-step-worker-1", "worker 1", 1, {{0, 2.5}, {10, 1.5}}});
  const std::string svg = RenderSvgChart("run", {a}, 2);
  CHECK(svg.rfind("<?xml", 0) == 0);
  const auto group = svg.find("<g id=\"loss-step\" class=\"panel\">");
  REQUIRE(group != std::string::npos);
  CHECK(svg.find("<polyline id=\"loss-step-worker-0\"", group) != std::string::npos);
  CHECK(svg.find("<polyline id=\"loss-step-worker-1\"", group) != std::string::npos);
  CHECK(svg.find(">worker 1</text>") != std::string::npos);  // the legend
}

}  // namespace
}  // namespace pstrain
