// The heap as pprof's profile.proto, gzipped: what `go tool pprof`, Pyroscope, Parca and
// Grafana read. The sample types are those of Go's heap profiles (alloc_objects, alloc_space,
// inuse_objects, inuse_space), one sample per stack of the model's heap domain, so a Go user's
// habits (`-sample_index=alloc_space`, `-top`, `-http`) carry over.
//
// The figures are the model's own: the allocations counted in its window, and "in use" the
// counted blocks live at the end of the trace, or at ReplayOptions::at when the model was
// replayed with one. A sampled trace gives its estimates (Horvitz-Thompson weights), with its
// sampling interval as the profile's period.
#pragma once

#include <string>

#include "analysis/model.h"
#include "analysis/symbols.h"

namespace memtide::exporter {

struct PprofOptions {
  bool inuse_at = false;  // in use at the model's `at` time instead of at the end
  std::string source;     // the trace's path, named in the profile's comments
};

// The gzipped profile. Functions, file:line and inlined frames come from `symbols` (the
// report's names); each module a stack passes through is a mapping with its build-id.
std::string pprof_profile(const analysis::Model& model, analysis::Symbolizer& symbols, const PprofOptions& options);

}  // namespace memtide::exporter
