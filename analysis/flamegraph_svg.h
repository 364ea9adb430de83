// A self-contained interactive flamegraph SVG from a CallTree: static rectangles and labels
// (readable by any SVG viewer), plus embedded JavaScript for click-to-zoom, search (button or
// Ctrl-F) and a details line on hover; every frame also has a <title> tooltip. No external
// resources. Frames narrower than `min_width_fraction` of the total are left out (their
// weight stays in their parent's width).
#pragma once

#include <ostream>
#include <string>

#include "analysis/calltree.h"

namespace memtide::analysis {

struct SvgOptions {
  std::string title = "memtide flamegraph";
  std::string subtitle;          // e.g. the trace and the metric
  std::string unit = "bytes";    // "bytes" (values shown as KiB/MiB) or a count noun
  bool bytes = true;
  int width = 1200;
  int frame_height = 16;
  double min_width_fraction = 0.0005;
  // Colour family: "hot" (allocations), "red" (leaks), "blue" (temporaries), "green" (peak).
  std::string palette = "hot";
};

void write_flamegraph_svg(const CallTree& tree, const SvgOptions& options, std::ostream& out);

}  // namespace memtide::analysis
