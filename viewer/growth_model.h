// Growth view model: the stacks whose live heap bytes keep growing after a warm-up
// (analysis/growth.h), and the live bytes over time of the top stacks, as the layers of a
// stacked area chart: the growing stacks first, then the largest others, then the rest of the
// heap in one layer. Built from the whole trace's history (analysis/stack_history.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/growth.h"
#include "analysis/model.h"
#include "analysis/symbols.h"
#include "viewer/serial.h"

namespace memtide::viewer {

struct GrowthLayer {
  uint64_t stack = 0;  // 0: the rest of the heap
  std::string site;    // the allocation site's function ("other stacks" for the rest)
  std::string module;  // its module (file name)
  std::vector<std::string> frames;  // "function (file:line)", allocation site first
  std::vector<uint64_t> bytes;      // live at the end of each interval
  std::vector<uint64_t> top;        // the stacked total up to this layer, at the end of each interval
  bool growing = false;
  analysis::StackGrowth g;  // its figures over the window (growing or not)
};

struct GrowthData {
  std::string problem;  // why growth was not judged; the chart is drawn all the same
  analysis::Growth growth;
  std::vector<uint64_t> times;  // the end of each interval, relative to the trace's start
  uint64_t start = 0;           // relative: where the trace's range starts (a kept set's first checkpoint)
  uint64_t warmup = 0;          // its length, from `start`
  uint64_t window_from = 0, window_to = 0;  // growth's window, relative
  std::vector<GrowthLayer> layers;  // bottom to top; the last is the rest of the heap
  uint64_t max_total = 0;           // the highest stacked total
  bool sampled = false;
  uint64_t serial = next_serial();
};

// `max_stacks` layers of stacks at most (the growing ones first, fastest first, then the stacks
// with the most live bytes on average), plus the rest.
GrowthData make_growth(const analysis::Model& m, analysis::Symbolizer& sym, std::size_t max_stacks = 8,
                       const analysis::GrowthOptions& o = {});

}  // namespace memtide::viewer
