// A small SVG writer for `lkjit tune --plot`: per kernel, one panel per tile axis with every measured
// candidate's time against that axis's value, the best time per value joined by a line (the axis's
// main effect), and the default and chosen tiles marked.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace lkjit::tool {

struct PlotPoint {
  std::map<std::string, int> axes;  // axis name -> value
  double ms = 0;
  bool is_default = false, is_chosen = false;
};

struct PlotKernel {
  std::string title;              // e.g. "wtconv_fwd_plane f32 k=5 L=5 on 64x96x56x56"
  std::vector<std::string> axes;  // in tile-space order
  std::vector<PlotPoint> points;  // measured (ok) candidates only
};

// A standalone SVG document. Axes with a single value among the points get no panel.
std::string svg_main_effects(const std::vector<PlotKernel>& kernels, const std::string& caption);

}  // namespace lkjit::tool
