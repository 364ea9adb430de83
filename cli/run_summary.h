// The few lines `memtide run` prints after the program ended, one trace at a time:
//
//   /tmp/prog.1234.mtide
//     1,024 allocations, peak heap 1.50 MiB at 0.250 s, 12.0 KiB in 3 blocks not freed
//
// (at most kShown traces; the others in one line). The models come from a totals-only replay:
// the follower's (`memtide symbolize --manifest M --summary FILE`, which replays each trace as
// it is written, so that the lines are ready when the program ends), or `memtide summary`'s.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/replay.h"

namespace memtide::cli {

struct SummaryEntry {
  std::string path, pid;
  std::string text;  // its lines (the trace's model is not kept: a run may have many big traces)
  std::string exe;   // the program's file name
  uint64_t allocations = 0;
  bool ok = false, shown = false;
};

// The replay options of a summary: totals, peak and leak counts only.
analysis::ReplayOptions summary_replay_options();

// Fills e's lines from the replay of its trace.
void describe(SummaryEntry& e, const analysis::AnalyzeResult& r);

// Writes the entries' lines (at most kShown traces, the rest counted in one line).
void print_summary(std::vector<SummaryEntry>& entries, std::ostream& out);

}  // namespace memtide::cli
