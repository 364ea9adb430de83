// Growth: the stacks whose live heap memory keeps growing after a warm-up, the leak signal of a
// worker that never exits, told apart from caches that fill and then hold. Read from the
// replay's history of live bytes by stack (analysis/stack_history.h; replay with
// ReplayOptions::stack_history). Sampled traces: the history holds the weighted estimates.
//
// Per stack, over the window's intervals (from the end of the warm-up to the end of the trace;
// of a process that exited, to the last interval end a whole interval before its end, leaving
// out its teardown):
//   - the rate: the slope of Tukey's resistant line (the medians of the first and last thirds
//     of the points), robust to the ups and downs of churn and to a few outliers;
//   - the noise: the spread of the points about that line (1.4826 x the median absolute
//     residual, a standard deviation for normal noise);
//   - the tail's rate: the same slope over the last third of the window alone;
//   - steadiness: the share of intervals in which its live bytes rose.
// A stack grows when its rise over the window (rate x length) is more than 3 times its noise,
// the median of each third of the window is above the one before, the tail still rises at a
// third of the rate or more, and it rose in each third of the window. A cache that filled and
// then held is flat in the tail and its last two thirds are level ("held"); churn about a level
// has no rise beyond its noise; a one-time allocation late in the window is one step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/model.h"

namespace memtide::analysis {

struct GrowthOptions {
  // The window starts this long after the start of the trace (ns); unset: a tenth of the run.
  std::optional<uint64_t> warmup;
};

struct StackGrowth {
  StackId stack;
  uint64_t start_bytes = 0, start_blocks = 0;  // live at the start of the window
  uint64_t end_bytes = 0, end_blocks = 0;      // live at its end
  double bytes_per_min = 0;                    // the robust rate
  double tail_bytes_per_min = 0;               // the rate over the last third of the window
  double noise_bytes = 0;                      // the spread about the line
  double steadiness = 0;                       // share of intervals in which live bytes rose
  uint32_t rises[3] = {};                      // intervals in which it rose, per third of the window
  double medians[3] = {};                      // median live bytes of each third of the window
};

struct Growth {
  std::string problem;  // why growth could not be judged (no history, too short); else empty
  uint64_t from = 0, to = 0;  // the window (absolute): the end of the warm-up's interval, the end
  uint64_t interval_ns = 0;
  uint32_t intervals = 0;  // in the window
  std::vector<StackGrowth> growing;  // fastest first
  std::vector<StackGrowth> held;     // rose() but not growing: a cache that filled; largest rise first
  double bytes_per_min = 0;          // of the growing stacks together
  bool ok() const { return problem.empty(); }
};

// The fewest intervals a window needs for growth to be judged.
inline constexpr uint32_t kMinGrowthIntervals = 8;

Growth analyze_growth(const Model& m, const GrowthOptions& o = {});

// One stack's figures from its live bytes and blocks at the ends of the window's intervals
// (times[i]: the end of interval i, absolute ns). Whether it grows: grows(g).
StackGrowth stack_growth(const std::vector<uint64_t>& times, const std::vector<uint64_t>& bytes,
                         const std::vector<uint64_t>& blocks);
bool grows(const StackGrowth& g, uint64_t window_ns);
// Ended the window above where it started by more than 4 times its noise, whether or not it
// grew steadily (a cache that filled in the window and then held).
bool rose(const StackGrowth& g, uint64_t window_ns);

}  // namespace memtide::analysis
