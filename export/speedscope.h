// The heap allocations as speedscope's JSON file format (its published file-format-spec):
// one sampled profile per thread, its samples the thread's allocations in the order they were
// made, each weighed by its bytes, so speedscope's time-order view is the allocation timeline
// and its left-heavy and sandwich views the allocated bytes by stack.
//
// The model gives the threads, the window and the names; the allocations themselves are read
// again from the trace, stream by stream (a thread's records are in time order in its own
// stream). Consecutive allocations of one thread from one stack are one sample of their summed
// bytes, as speedscope would merge them anyway. A sampled trace's allocations weigh their
// estimated bytes.
#pragma once

#include <ostream>
#include <string>

#include "analysis/model.h"
#include "analysis/symbols.h"

namespace memtide::exporter {

struct SpeedscopeOptions {
  std::string exporter = "memtide";  // the file's "exporter" field
};

// Writes the file for the trace at `path`, replayed into `model`. Empty on success, else why
// the trace could not be read again.
std::string write_speedscope(const std::string& path, const analysis::Model& model, analysis::Symbolizer& symbols,
                             const SpeedscopeOptions& options, std::ostream& out);

}  // namespace memtide::exporter
