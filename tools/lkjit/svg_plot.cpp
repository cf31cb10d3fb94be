#include "tools/lkjit/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace lkjit::tool {
namespace {

constexpr double kPanelW = 300, kPanelH = 210, kLeft = 62, kRight = 14, kTop = 30, kBottom = 38;
constexpr double kCellW = kLeft + kPanelW + kRight, kCellH = kTop + kPanelH + kBottom;
constexpr double kHeader = 52;

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// Panel of one axis: categorical x (the axis's values), linear y in ms.
void panel(std::string& out, double x0, double y0, const PlotKernel& k, const std::string& axis, double lo, double hi) {
  std::set<int> vals;
  for (const auto& p : k.points) vals.insert(p.axes.count(axis) ? p.axes.at(axis) : 0);
  const std::vector<int> cats(vals.begin(), vals.end());
  const double px = x0 + kLeft, py = y0 + kTop, cw = kPanelW / cats.size();
  auto xof = [&](int v) { return px + (std::lower_bound(cats.begin(), cats.end(), v) - cats.begin() + 0.5) * cw; };
  auto yof = [&](double ms) { return py + kPanelH - (ms - lo) / (hi - lo) * kPanelH; };
  out += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="#fafafa" stroke="#999"/>)" "\n",
                     px, py, kPanelW, kPanelH);
  out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="12" font-weight="bold">{}</text>)" "\n", px, py - 8, esc(axis));
  for (int t = 0; t <= 4; ++t) {
    const double v = lo + (hi - lo) * t / 4, y = yof(v);
    out += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#e4e4e4"/>)" "\n", px, y, px + kPanelW, y);
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="end">{:.4g}</text>)" "\n", px - 4, y + 3, v);
  }
  out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" font-size="10" transform="rotate(-90 {:.1f} {:.1f})" text-anchor="middle">ms</text>)svg" "\n",
                     x0 + 14, py + kPanelH / 2, x0 + 14, py + kPanelH / 2);
  for (int v : cats)
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="middle">{}</text>)" "\n", xof(v),
                       py + kPanelH + 14, v);
  // Every candidate, spread a little within its column so equal values stay visible.
  for (size_t i = 0; i < k.points.size(); ++i) {
    const auto& p = k.points[i];
    const double jitter = (double((i * 37) % 11) - 5) * cw / 40;
    out += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="2.5" fill="#8a8a8a" fill-opacity="0.7"/>)" "\n",
                       xof(p.axes.count(axis) ? p.axes.at(axis) : 0) + jitter, yof(p.ms));
  }
  // Best per value: the axis's main effect.
  std::string line;
  for (int v : cats) {
    double best = 0;
    for (const auto& p : k.points)
      if ((p.axes.count(axis) ? p.axes.at(axis) : 0) == v && (best == 0 || p.ms < best)) best = p.ms;
    line += fmt::format("{:.1f},{:.1f} ", xof(v), yof(best));
  }
  out += fmt::format(R"(<polyline points="{}" fill="none" stroke="#1f5fbf" stroke-width="1.5"/>)" "\n", line);
  for (const auto& p : k.points) {
    const double x = xof(p.axes.count(axis) ? p.axes.at(axis) : 0), y = yof(p.ms);
    if (p.is_default)
      out += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="6" fill="none" stroke="#1f5fbf" stroke-width="2"/>)" "\n", x, y);
    if (p.is_chosen)
      out += fmt::format(R"(<path d="M {:.1f} {:.1f} l 5 5 l -5 5 l -5 -5 z" fill="#d62728"/>)" "\n", x, y - 5);
  }
}

}  // namespace

std::string svg_main_effects(const std::vector<PlotKernel>& kernels, const std::string& caption) {
  struct Row {
    const PlotKernel* k;
    std::vector<std::string> axes;
    double lo, hi;
  };
  std::vector<Row> rows;
  size_t cols = 1;
  for (const auto& k : kernels) {
    if (k.points.empty()) continue;
    Row r{&k, {}, 0, 0};
    for (const auto& a : k.axes) {
      std::set<int> vals;
      for (const auto& p : k.points) vals.insert(p.axes.count(a) ? p.axes.at(a) : 0);
      if (vals.size() > 1) r.axes.push_back(a);
    }
    if (r.axes.empty()) continue;
    double mn = k.points[0].ms, mx = mn;
    for (const auto& p : k.points) mn = std::min(mn, p.ms), mx = std::max(mx, p.ms);
    const double pad = std::max((mx - mn) * 0.06, mx * 0.01);
    r.lo = std::max(0.0, mn - pad), r.hi = mx + pad;
    cols = std::max(cols, r.axes.size());
    rows.push_back(std::move(r));
  }
  const double width = 20 + cols * kCellW, height = kHeader + std::max<size_t>(rows.size(), 1) * (kCellH + 22);
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" font-family="sans-serif">)" "\n"
      R"(<rect width="100%" height="100%" fill="white"/>)" "\n"
      R"(<text x="10" y="20" font-size="14" font-weight="bold">{}</text>)" "\n"
      R"(<text x="10" y="38" font-size="11" fill="#444">gray: every measured candidate; blue line: best time per axis value; blue ring: default tile; red diamond: chosen tile</text>)" "\n",
      width, height, width, height, esc(caption));
  if (rows.empty())
    out += R"(<text x="10" y="70" font-size="12">no measured candidates with more than one value on an axis</text>)" "\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    const double y0 = kHeader + r * (kCellH + 22);
    out += fmt::format(R"(<text x="10" y="{:.1f}" font-size="12" font-weight="bold">{}</text>)" "\n", y0 + 12, esc(rows[r].k->title));
    for (size_t c = 0; c < rows[r].axes.size(); ++c)
      panel(out, 10 + c * kCellW, y0 + 16, *rows[r].k, rows[r].axes[c], rows[r].lo, rows[r].hi);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace lkjit::tool
