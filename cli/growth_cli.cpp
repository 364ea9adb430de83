#include "cli/growth_cli.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>

#include "cli/analysis_cli.h"
#include "cli/common.h"

namespace memtide::cli {

using namespace memtide::analysis;
using nlohmann::json;

std::optional<double> parse_rate(const std::string& s) {
  const std::size_t slash = s.rfind('/');
  if (slash == std::string::npos) return std::nullopt;
  const std::string unit = s.substr(slash + 1);
  double per_min;
  if (unit == "s") per_min = 60;
  else if (unit == "min") per_min = 1;
  else if (unit == "h") per_min = 1.0 / 60;
  else return std::nullopt;
  const auto bytes = parse_size(s.substr(0, slash));
  if (!bytes) return std::nullopt;
  return static_cast<double>(*bytes) * per_min;
}

std::string human_rate(double bytes_per_min) {
  return human_bytes(static_cast<uint64_t>(std::llround(std::max(0.0, bytes_per_min)))) + "/min";
}

CLI::Option* GrowthCliOptions::declare(CLI::App& sub) {
  const CLI::Validator time_check(
      [](std::string& v) -> std::string {
        return parse_time(v) ? std::string() : "not a time: '" + v + "' (examples: 30s, 2min, 250ms; plain: seconds)";
      },
      "TIME");
  return sub.add_option("--warmup", warmup,
                 "Growth: ignore the run's first TIME, while caches fill (default: a tenth of the run)")
      ->check(time_check);
}

GrowthOptions GrowthCliOptions::options() const {
  GrowthOptions o;
  if (!warmup.empty()) o.warmup = parse_time(warmup);
  return o;
}

namespace {

json rel(const Model& m, uint64_t t) { return t >= m.time_base ? t - m.time_base : 0; }

json items(const std::vector<StackGrowth>& v, Symbolizer& sym, std::size_t top, std::size_t frames) {
  json arr = json::array();
  for (const StackGrowth& s : v) {
    if (arr.size() == top) break;
    arr.push_back({{"bytes_per_min", std::llround(s.bytes_per_min)},
                   {"start_bytes", s.start_bytes},
                   {"start_blocks", s.start_blocks},
                   {"end_bytes", s.end_bytes},
                   {"end_blocks", s.end_blocks},
                   {"steadiness", std::round(s.steadiness * 1000) / 1000},
                   {"tail_bytes_per_min", std::llround(s.tail_bytes_per_min)},
                   {"stack_id", s.stack.value},
                   {"stack", stack_json(sym, s.stack, frames)}});
  }
  return arr;
}

}  // namespace

json growth_json(const Model&, const Growth& g, Symbolizer& sym, std::size_t top, std::size_t frames) {
  return items(g.growing, sym, top, frames);
}

json growth_window_json(const Model& m, const Growth& g, const GrowthCliOptions& o, Symbolizer& sym, std::size_t top,
                        std::size_t frames) {
  const GrowthOptions go = o.options();
  return {{"warmup_ns", go.warmup ? *go.warmup : m.duration() / 10},
          {"problem", g.ok() ? json(nullptr) : json(g.problem)},
          {"from_ns", g.ok() ? rel(m, g.from) : json(nullptr)},
          {"to_ns", g.ok() ? rel(m, g.to) : json(nullptr)},
          {"interval_ns", g.interval_ns},
          {"intervals", g.intervals},
          {"bytes_per_min", std::llround(g.bytes_per_min)},
          {"stacks", g.growing.size()},
          {"held", items(g.held, sym, top, frames)}};
}

std::string growth_line(const StackGrowth& s) {
  return human_rate(s.bytes_per_min) + ": " + human_bytes(s.start_bytes) + " in " +
         count_of(s.start_blocks, "block", "blocks") + " -> " + human_bytes(s.end_bytes) + " in " +
         count_of(s.end_blocks, "block", "blocks") + ", rose in " +
         std::to_string(std::lround(s.steadiness * 100)) + "% of intervals";
}

void print_growth(const Model& m, const Growth& g, Symbolizer& sym, std::size_t top, std::size_t frames) {
  if (!g.ok()) {
    std::printf("\nGROWTH: not judged: %s\n", printable(g.problem).c_str());
    return;
  }
  std::printf("\nGROWTH (live heap bytes rising steadily from %s to %s, %s of %s; by stack)\n",
              rel_time(m, g.from).c_str(), rel_time(m, g.to).c_str(),
              count_of(g.intervals, "interval", "intervals").c_str(), format_duration(g.interval_ns).c_str());
  if (g.growing.empty())
    std::printf("  no stack grew steadily after the warm-up\n");
  else
    std::printf("  %s from %s\n", human_rate(g.bytes_per_min).c_str(),
                count_of(g.growing.size(), "stack", "stacks").c_str());
  std::size_t i = 0;
  for (const StackGrowth& s : g.growing) {
    if (i == top) {
      std::printf("  ... %s (--top to see them)\n", count_of(g.growing.size() - i, "more stack", "more stacks").c_str());
      break;
    }
    std::printf("  %2zu. %s\n", ++i, growth_line(s).c_str());
    print_stack(sym, s.stack, frames);
  }
  if (g.held.empty()) return;
  std::printf("\nHELD (rose after the warm-up, but not steadily to the end: a cache that filled, a one-time "
              "allocation; not growth)\n");
  i = 0;
  for (const StackGrowth& s : g.held) {
    if (i == top) {
      std::printf("  ... %s (--top to see them)\n", count_of(g.held.size() - i, "more stack", "more stacks").c_str());
      break;
    }
    std::printf("  %2zu. %s in %s -> %s in %s\n", ++i, human_bytes(s.start_bytes).c_str(),
                count_of(s.start_blocks, "block", "blocks").c_str(), human_bytes(s.end_bytes).c_str(),
                count_of(s.end_blocks, "block", "blocks").c_str());
    print_stack(sym, s.stack, frames);
  }
}

}  // namespace memtide::cli
