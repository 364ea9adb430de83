// Growth (analysis/growth.h) for `memtide report --growth` and `memtide check --max-growth`:
// the options, the rate's syntax, and the output as text and JSON.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "analysis/growth.h"
#include "analysis/symbols.h"

namespace CLI {
class App;
class Option;
}

namespace memtide::cli {

// "64KiB/min", "1MB/h", "512/s" (a size as everywhere, per s, min or h): bytes per minute;
// nullopt when malformed.
std::optional<double> parse_rate(const std::string& s);
// "64.0 KiB/min".
std::string human_rate(double bytes_per_min);

// --warmup T (and the growth analysis it configures).
struct GrowthCliOptions {
  std::string warmup;  // empty: a tenth of the run
  CLI::Option* declare(CLI::App& sub);
  analysis::GrowthOptions options() const;
};

// The report's `growth` list (fastest first, at most `top`) and its `growth_window` object.
nlohmann::json growth_json(const analysis::Model& m, const analysis::Growth& g, analysis::Symbolizer& sym,
                           std::size_t top, std::size_t frames);
nlohmann::json growth_window_json(const analysis::Model& m, const analysis::Growth& g, const GrowthCliOptions& o,
                                  analysis::Symbolizer& sym, std::size_t top, std::size_t frames);
// The GROWTH and HELD sections of a text report.
void print_growth(const analysis::Model& m, const analysis::Growth& g, analysis::Symbolizer& sym, std::size_t top,
                  std::size_t frames);
// One growing stack as a line: "750 KiB/min, 12.5 KiB in 200 blocks -> 187 KiB in 3,000 blocks, rose in 98% of intervals".
std::string growth_line(const analysis::StackGrowth& s);

}  // namespace memtide::cli
