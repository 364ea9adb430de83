// `memtide diff A B [--top N] [--json]`: what changed between two traces (e.g. before and
// after a change, or two runs of a worker): totals, and per stack the differences in bytes
// leaked, bytes live at the peak and bytes allocated. Stacks are matched by their frames'
// function, file and line (not addresses, which differ between builds and runs).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/diff.h"
#include "cli/analysis_cli.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace memtide::cli {
namespace {

using namespace memtide::analysis;
using nlohmann::json;

struct DiffOptions {
  std::string a, b;
  std::size_t top = 10, frames = 16;
  bool json = false;
};

std::string signed_bytes(int64_t d) { return (d > 0 ? "+" : d < 0 ? "-" : "±") + human_bytes(static_cast<uint64_t>(d < 0 ? -d : d)); }
std::string signed_count(int64_t d) { return (d > 0 ? "+" : "") + std::to_string(d); }

int run_diff(const DiffOptions& o) {
  auto ma = load_model(o.a, {});
  if (!ma) return kExitError;
  auto mb = load_model(o.b, {});
  if (!mb) return kExitError;
  Symbolizer sa(*ma), sb(*mb);
  Symbolizer* syms[2] = {&sa, &sb};
  const StackDiff all(*ma, sa, *mb, sb);

  struct Row {
    const char* name;
    Metric metric;
    bool bytes;
  };
  const Row rows[] = {{"leaked", Metric::Leaked, true}, {"peak", Metric::Peak, true}, {"allocated", Metric::Allocated, true},
                      {"allocations", Metric::Count, false}};
  auto total = [](const Model& m, Metric x) -> uint64_t {
    const Totals& t = m.heap();
    switch (x) {
      case Metric::Leaked: return t.leaked_bytes;
      case Metric::Peak: return t.peak_bytes;
      case Metric::Allocated: return t.allocated_bytes;
      default: return t.allocations;
    }
  };

  if (o.json) {
    json j;
    j["a"] = o.a;
    j["a_sampling_interval_bytes"] = ma->sampling.sampled() ? json(ma->sampling.interval()) : json(nullptr);
    j["b_sampling_interval_bytes"] = mb->sampling.sampled() ? json(mb->sampling.interval()) : json(nullptr);
    j["b"] = o.b;
    json totals = json::object();
    for (const Row& r : rows)
      totals[r.name] = {{"a", total(*ma, r.metric)},
                        {"b", total(*mb, r.metric)},
                        {"delta", static_cast<int64_t>(total(*mb, r.metric)) - static_cast<int64_t>(total(*ma, r.metric))}};
    j["totals"] = totals;
    for (const Row& r : rows) {
      if (r.metric == Metric::Count) continue;
      json arr = json::array();
      for (const StackChange* e : all.largest(r.metric, o.top)) {
        const int side = e->s[1].present ? 1 : 0;
        arr.push_back({{"a_bytes", e->s[0].m.value(r.metric)},
                       {"b_bytes", e->s[1].m.value(r.metric)},
                       {"delta_bytes", e->delta(r.metric)},
                       {"a_count", e->s[0].m.blocks(r.metric)},
                       {"b_count", e->s[1].m.blocks(r.metric)},
                       {"only_in", e->s[0].present && e->s[1].present ? json(nullptr) : json(side ? "b" : "a")},
                       {"stack", stack_json(*syms[side], e->s[side].stack, o.frames)}});
      }
      j[std::string(r.name) + "_changes"] = arr;
    }
    std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
    return kExitOk;
  }

  auto sampled_note = [](const Model& m) {
    return m.sampling.sampled() ? "  (sampled, 1 in ~" + human_bytes(m.sampling.interval()) + ": estimates)" : std::string();
  };
  std::printf("memtide diff\n  A  %s%s\n  B  %s%s\n\n", printable(o.a).c_str(), sampled_note(*ma).c_str(),
              printable(o.b).c_str(), sampled_note(*mb).c_str());
  std::printf("  %-12s %14s %14s %16s\n", "", "A", "B", "change");
  for (const Row& r : rows) {
    const uint64_t x = total(*ma, r.metric), y = total(*mb, r.metric);
    const int64_t d = static_cast<int64_t>(y) - static_cast<int64_t>(x);
    std::printf("  %-12s %14s %14s %16s\n", r.name, (r.bytes ? human_bytes(x) : std::to_string(x)).c_str(),
                (r.bytes ? human_bytes(y) : std::to_string(y)).c_str(), (r.bytes ? signed_bytes(d) : signed_count(d)).c_str());
  }
  for (const Row& r : rows) {
    if (r.metric == Metric::Count) continue;
    const auto top = all.largest(r.metric, o.top);
    if (top.empty()) continue;
    std::printf("\n%s BYTES: largest changes by stack\n", r.name);
    std::size_t i = 0;
    for (const StackChange* e : top) {
      const int side = e->s[1].present ? 1 : 0;
      std::string note = !e->s[0].present ? " (only in B)" : !e->s[1].present ? " (only in A)" : "";
      std::printf("  %2zu. %s (%s -> %s)%s\n", ++i, signed_bytes(e->delta(r.metric)).c_str(),
                  human_bytes(e->s[0].m.value(r.metric)).c_str(), human_bytes(e->s[1].m.value(r.metric)).c_str(),
                  note.c_str());
      print_stack(*syms[side], e->s[side].stack, o.frames);
    }
  }
  return kExitOk;
}

}  // namespace

Command diff_command() {
  return {"diff", "Compare two traces: totals and per-stack changes in leaks, peak and allocations",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<DiffOptions>();
            sub.add_option("a", o->a, "The trace before (.mtide)")->required();
            sub.add_option("b", o->b, "The trace after (.mtide)")->required();
            sub.add_option("--top", o->top, "Stacks listed per metric (default 10)")->check(CLI::Range(1, 1000000));
            sub.add_option("--frames", o->frames, "Frames printed per stack (default 16)")->check(CLI::Range(1, 100000));
            sub.add_flag("--json", o->json, "Print the differences as JSON");
            return [o] { return run_diff(*o); };
          }};
}

}  // namespace memtide::cli
