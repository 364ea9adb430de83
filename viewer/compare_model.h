// Compare view model: the baseline (a second trace) analysed for the same time window as the
// main trace's view, and the differences of the two (diff_model.h) gathered into CompareData.
// With a selection on the timeline, both traces are restricted to the allocations made in the
// same range of times since their own start, so the comparison follows the selection like
// every other view.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>

#include "analysis/calltree.h"
#include "analysis/symbols.h"
#include "viewer/snapshot.h"

namespace memtide::viewer {

// The baseline's analysis of one window (empty: the whole baseline trace).
struct BaselineView {
  TimeRange window;
  std::shared_ptr<const analysis::Model> model;
  // [domain][metric][direction], every metric of every domain (the baseline is small next to
  // its call trees, and a domain the trace does not use has empty ones).
  std::array<std::array<std::array<std::shared_ptr<const analysis::CallTree>, 2>, kMetricCount>, analysis::kDomainCount>
      trees{};
};

// Builds the call trees of every domain and metric in both directions for `model` (a replay of
// the baseline restricted to `window`); `check` runs between trees (it may throw to abandon).
BaselineView make_baseline_view(std::shared_ptr<const analysis::Model> model, analysis::Symbolizer& sym,
                                TimeRange window, const std::function<void()>& check = {});

// The differences of `after` (the main trace's view: the whole trace or the selected window)
// to `before` (the baseline analysed for the same window). Metrics and domains whose trees
// `after` has not built yet are left out.
CompareData make_compare(const std::string& path, const BaselineView& before, const ViewData& after);

}  // namespace memtide::viewer
