// Live heap bytes and blocks of each stack over time, in equal intervals: what growth
// (analysis/growth.h) and the viewer's Growth view read. Kept by the replay when
// ReplayOptions::stack_history is set.
//
// The replay marks an interval's end lazily, at the first change of a stack after it, and
// records only the stacks that changed since the previous mark (a list the replay keeps as
// stacks first change), and only when their value differs from the one recorded: a track is
// sparse, a point holding from its interval on. Intervals start 1 ms wide and double (every
// track's points merged in pairs) whenever there would be more than kMaxIntervals, so the
// history of any run has between kMaxIntervals / 2 and kMaxIntervals intervals, and its memory
// is bounded by the stacks that change times kMaxIntervals, whatever the trace's length.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "analysis/ids.h"

namespace memtide::analysis {

struct StackHistory {
  static constexpr uint32_t kMaxIntervals = 256;
  static constexpr uint64_t kFirstWidth = 1'000'000;  // ns

  // The stack's live bytes and blocks at the end of `interval`, and on until the next point.
  struct Point {
    uint32_t interval = 0;
    uint64_t bytes = 0, blocks = 0;
  };
  struct Track {
    StackId stack;
    std::vector<Point> points;  // by interval; before the first point, nothing live
  };
  // Interval i covers [start + i * width, end_of(i)); the last one ends at `end` (the last
  // event replayed), and may be shorter.
  uint64_t start = 0, width = 0, end = 0;  // absolute trace times (ns)
  uint32_t intervals = 0;
  std::vector<Track> tracks;  // stacks that had something live at an interval's end

  bool empty() const { return intervals == 0; }
  uint64_t end_of(uint32_t i) const { return std::min(start + (uint64_t{i} + 1) * width, end); }
  // A track's values at the end of each interval (intervals of them).
  void dense(const Track& t, std::vector<uint64_t>& bytes, std::vector<uint64_t>* blocks = nullptr) const;
};

namespace detail {

struct DomainState;

// The replay's side of the history: called by DomainState::change at the first change at or
// after the end of the interval in progress (replay_state.h).
class HistoryRecorder {
 public:
  // Records the values at the end of the interval in progress of the stacks in `ds.dirty`, and
  // starts the interval that holds `time`. Returns when that interval ends.
  uint64_t mark(uint64_t time, DomainState& ds);
  // The history as if the trace ended at `end`; the recorder goes on unchanged.
  StackHistory finish(uint64_t end, const DomainState& ds) const;

 private:
  void record(uint32_t work, uint64_t bytes, uint64_t blocks);
  void coarsen();
  bool started_ = false;
  uint64_t start_ = 0, width_ = StackHistory::kFirstWidth;
  uint32_t cur_ = 0;  // the interval in progress
  std::vector<std::vector<StackHistory::Point>> points_;  // by the domain's work index
};

}  // namespace detail
}  // namespace memtide::analysis
