// What the views draw: immutable results of the loader thread (viewer/loader.h), published as
// a whole and swapped into the UI between frames. Nothing here changes after publication;
// a newer analysis publishes a new Snapshot that shares the unchanged parts.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "analysis/calltree.h"
#include "analysis/model.h"
#include "viewer/diff_model.h"
#include "viewer/flame_model.h"
#include "viewer/growth_model.h"
#include "viewer/leaks_model.h"
#include "viewer/summary_model.h"
#include "viewer/timeline_model.h"
#include "viewer/tree_model.h"

namespace memtide::viewer {

enum class Direction : uint8_t { TopDown, BottomUp };

// The leaks, flamegraphs and tree tables of anonymous mappings or of custom-pool blocks: built
// together, every metric at once, when a view first selects the domain (their stacks are few).
struct DomainData {
  std::shared_ptr<const LeaksData> leaks;
  std::array<std::array<std::shared_ptr<const analysis::CallTree>, 2>, kMetricCount> trees{};  // [metric][direction]
  std::array<std::array<std::shared_ptr<const FlameTree>, 2>, kMetricCount> flames{};  // [metric][direction]
  std::array<std::shared_ptr<const TreeTable>, 2> tables{};                            // [direction]
};

// The analysis of one time window (or of the whole trace). The heap's parts are built per
// metric as views ask for them; the other domains' in `domains`.
struct ViewData {
  TimeRange window;  // relative; empty: the whole trace
  std::shared_ptr<const analysis::Model> model;
  std::shared_ptr<const SummaryData> summary;
  std::shared_ptr<const LeaksData> leaks;  // null until built
  // [metric][direction]; null until built.
  std::array<std::array<std::shared_ptr<const analysis::CallTree>, 2>, kMetricCount> trees{};
  std::array<std::array<std::shared_ptr<const FlameTree>, 2>, kMetricCount> flames{};
  std::array<std::shared_ptr<const TreeTable>, 2> tables{};
  std::array<std::shared_ptr<const DomainData>, analysis::kDomainCount> domains{};  // [Heap] unused
  bool complete = false;  // every part above is built
  uint64_t bytes_read = 0;  // file bytes the window's replay read (0: the whole trace's view)

  const FlameTree* flame(analysis::Metric m, Direction d) const {
    return flames[static_cast<unsigned>(m)][static_cast<unsigned>(d)].get();
  }
  // Of any domain; null until built.
  const FlameTree* flame(analysis::Domain dom, analysis::Metric m, Direction d) const {
    if (dom == analysis::Domain::Heap) return flame(m, d);
    const DomainData* x = domains[static_cast<unsigned>(dom)].get();
    return x ? x->flames[static_cast<unsigned>(m)][static_cast<unsigned>(d)].get() : nullptr;
  }
  // The call tree of any domain; null until built.
  std::shared_ptr<const analysis::CallTree> tree(analysis::Domain dom, analysis::Metric m, Direction d) const {
    const auto mi = static_cast<unsigned>(m), di = static_cast<unsigned>(d);
    if (dom == analysis::Domain::Heap) return trees[mi][di];
    const DomainData* x = domains[static_cast<unsigned>(dom)].get();
    return x ? x->trees[mi][di] : nullptr;
  }
  const TreeTable* table(analysis::Domain dom, Direction d) const {
    if (dom == analysis::Domain::Heap) return tables[static_cast<unsigned>(d)].get();
    const DomainData* x = domains[static_cast<unsigned>(dom)].get();
    return x ? x->tables[static_cast<unsigned>(d)].get() : nullptr;
  }
  const LeaksData* leaks_of(analysis::Domain dom) const {
    if (dom == analysis::Domain::Heap) return leaks.get();
    const DomainData* x = domains[static_cast<unsigned>(dom)].get();
    return x ? x->leaks.get() : nullptr;
  }
};

// A second trace (the baseline) and the differences of the first to it, for the window of the
// first trace's view (viewer/compare_model.h): both traces restricted to the allocations made
// in the same range of times since their start, or both whole.
struct CompareData {
  std::string path;
  std::string error;  // could not be opened
  TimeRange window;   // relative; empty: the whole traces
  std::shared_ptr<const analysis::Model> model;  // the baseline's, for `window`
  std::shared_ptr<const analysis::Model> after;  // this trace's, for `window`
  // [domain][metric][0: shaped by the newer (second) trace, 1: by the older (first) trace];
  // a domain other than the heap once the main trace's view has built it (a view selected it).
  std::array<std::array<std::array<std::shared_ptr<const FlameTree>, 2>, kMetricCount>, analysis::kDomainCount> flames{};
  std::array<std::array<std::shared_ptr<const std::vector<DiffRow>>, kMetricCount>, analysis::kDomainCount> sites{};
  bool complete = false;
  // The baseline is open but its analysis for `window` is still to be made (the selection
  // changed): the loader makes it next.
  bool pending = false;
  uint64_t serial = next_serial();
};

struct Snapshot {
  uint64_t generation = 0;  // increases with every publication
  std::string path;
  std::string error;  // the file could not be opened / read (one line)
  bool live = false;          // following a file that a recorder still writes
  bool writer_alive = false;  // at the last refresh
  uint64_t refreshes = 0;     // analyses of the whole file so far (live mode: one per refresh)
  double analysis_seconds = 0;
  uint64_t refresh_bytes = 0;  // bytes the last live refresh read from the file

  std::shared_ptr<const analysis::Model> base;  // the whole trace
  std::shared_ptr<const SummaryData> summary;
  std::shared_ptr<const TimelineData> timeline;
  std::shared_ptr<const GrowthData> growth;  // of the whole trace
  std::shared_ptr<const ViewData> view;     // the selected window's (or the whole trace's)
  std::shared_ptr<const CompareData> compare;
  // Modules whose names could not be resolved ("libfoo.so: build-id differs ..."), one line each.
  std::shared_ptr<const std::vector<std::string>> symbol_problems;

  bool loaded() const { return base != nullptr; }
};

}  // namespace memtide::viewer
