// `memtide report FILE --histogram`: how many heap allocations of each size were made, in
// power-of-two classes (analysis/size_histogram.h, shared with the viewer's Sizes view).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/size_histogram.h"
#include "cli/analysis_cli.h"
#include "cli/common.h"

namespace memtide::cli {

int print_histogram(const std::string& file, bool as_json, std::optional<uint64_t> from, std::optional<uint64_t> to) {
  ProgressBar progress;
  const bool windowed = from || to;
  const analysis::SizeHistogramResult r = analysis::size_histogram_of_file(
      file,
      [&](uint64_t done, uint64_t total) {
        progress(done, total);
        return true;
      },
      from.value_or(0), to.value_or(UINT64_MAX), /*from_start=*/true);
  if (!r.ok()) {
    print_error(file, r.error);
    return kExitError;
  }
  if (!r.warning.empty()) print_warning(file, r.warning);
  const std::vector<analysis::SizeClass> classes = r.histogram.classes();
  const uint64_t all = r.histogram.allocations();
  if (as_json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const analysis::SizeClass& c : classes)
      rows.push_back({{"min_size", c.min_size}, {"max_size", c.max_size}, {"allocations", c.allocations}, {"bytes", c.bytes}});
    nlohmann::json j{{"file", file}, {"allocations", all}, {"histogram", rows}};
    if (windowed) j["window"] = {{"from_ns", from.value_or(0)}, {"to_ns", to ? nlohmann::json(*to) : nlohmann::json()}};
    std::cout << j.dump(2) << '\n';
    return kExitOk;
  }
  uint64_t most = 0;
  for (const analysis::SizeClass& c : classes) most = std::max(most, c.allocations);
  const std::string in_window = !windowed ? "" : ", made in [" + format_duration(from.value_or(0)) + ", " + (to ? format_duration(*to) : std::string("end")) + "]";
  std::printf("heap allocations by size (%s in all%s):\n", thousands(all).c_str(), in_window.c_str());
  std::printf("  %-21s %14s %7s %12s\n", "size", "allocations", "", "bytes");
  for (const analysis::SizeClass& c : classes) {
    const std::string range = human_bytes(c.min_size) + " .. " + human_bytes(c.max_size);
    const int bar = most ? static_cast<int>(c.allocations * 30 / most) : 0;
    std::printf("  %-21s %14s %6.1f%% %12s  %s\n", range.c_str(), thousands(c.allocations).c_str(),
                100.0 * static_cast<double>(c.allocations) / static_cast<double>(all),
                human_bytes(c.bytes).c_str(), paint(std::string(static_cast<std::size_t>(bar), '#'), "36").c_str());
  }
  return kExitOk;
}

}  // namespace memtide::cli
