// Compare view model: two traces' call trees of one metric merged by frame label, as a
// flamegraph (shaped by one trace, coloured by the difference) and as a table of allocation
// sites with their values before and after.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/calltree.h"
#include "analysis/diff.h"
#include "viewer/flame_model.h"

namespace memtide::viewer {

// `before` and `after` are trees of the same metric and direction. The frames' widths come
// from `after` (or from `before` when shape_of_before); FlameNode::other holds the other value.
FlameTree make_diff_flame(std::shared_ptr<const analysis::CallTree> before, std::shared_ptr<const analysis::CallTree> after,
                          bool shape_of_before = false);

// One row per allocation site (first level of bottom-up trees), in both traces or either:
// analysis::diff_sites.
using DiffRow = analysis::SiteChange;
using analysis::diff_sites;

enum class DiffColumn : uint8_t { Label, Before, After, Delta, Count_ };
std::vector<uint32_t> filter_and_sort_diff(const std::vector<DiffRow>& rows, std::string_view filter, DiffColumn c,
                                          bool ascending);

}  // namespace memtide::viewer
