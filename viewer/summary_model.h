// Summary view model: the process, totals, peaks, leaks and warnings of a trace as rows of
// label / value text, built once per analysis on the loader thread.
#pragma once

#include <string>
#include <vector>

#include "analysis/model.h"

namespace memtide::viewer {

struct SummaryRow {
  std::string label, value;
  bool emphasis = false;  // drawn in the warning colour (leaks, anomalies)
};

struct SummarySection {
  std::string title;
  std::vector<SummaryRow> rows;
};

struct SummaryData {
  std::string title;  // "memtide-example-worker (pid 123)"
  // A sampled trace: "sampled, 1 in ~512 KiB" (shown as a badge beside the title), and a
  // sentence on what that means for every figure; empty for an exact trace.
  std::string sampling_badge, sampling_note;
  std::vector<SummarySection> sections;
  std::vector<std::string> warnings;  // the model's, then anomalies worth a look
};

// `recording`: a recorder still writes the trace (it holds the file's lock), so that the
// missing End record is no sign of a kill.
SummaryData make_summary(const analysis::Model& m, const std::string& path, bool recording = false);

// "exit status 0", "killed by signal 9", "still running or killed (no end record)", ...
std::string end_description(const analysis::Model& m, bool recording = false);

}  // namespace memtide::viewer
