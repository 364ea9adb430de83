// The heap over time as valgrind massif's out file, what ms_print and massif-visualizer read:
// snapshots of the live heap bytes (the model's heap series, at most ReplayOptions::
// series_points of them), a detailed snapshot at the peak holding its heap tree (the bytes
// live at the high-water mark by allocation site, then by callers, as massif draws it), and a
// detailed last snapshot of what was live at the end. Times are milliseconds since the start.
// Entries under 1% of a tree's total are folded into one line, as massif's default threshold
// does.
#pragma once

#include <ostream>
#include <string>

#include "analysis/model.h"
#include "analysis/symbols.h"

namespace memtide::exporter {

struct MassifOptions {
  std::string source;        // the trace's path, named in the "desc:" line
  double threshold_pct = 1;  // massif's --threshold
};

void write_massif(const analysis::Model& model, analysis::Symbolizer& symbols, const MassifOptions& options,
                  std::ostream& out);

}  // namespace memtide::exporter
