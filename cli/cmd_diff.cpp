// `memtide diff A B [--top N] [--json]`: what changed between two traces (e.g. before and
// after a change, or two runs of a worker): totals, and per stack the differences in bytes
// leaked, bytes live at the peak and bytes allocated. Stacks are matched by their frames'
// function, file and line (not addresses, which differ between builds and runs).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

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

struct Side {
  StackMetrics m;
  StackId stack;  // one of the stacks merged into the key (for printing)
  bool present = false;
};
struct Entry {
  Side s[2];
};

// Key of a stack: its frames by name and place, allocation site first.
std::string stack_key(Symbolizer& sym, StackId id) {
  std::string k;
  for (const Frame& f : leaf_first(sym, id)) {
    k += frame_label(f);
    k += '\x1f';
    k += f.file;
    k += ':';
    k += std::to_string(f.line);
    k += '\x1e';
  }
  return k;
}

void add(StackMetrics& to, const StackMetrics& m) {
  to.alloc_count += m.alloc_count;
  to.alloc_bytes += m.alloc_bytes;
  to.leaked_bytes += m.leaked_bytes;
  to.leaked_blocks += m.leaked_blocks;
  to.peak_bytes += m.peak_bytes;
  to.peak_blocks += m.peak_blocks;
  to.temp_count += m.temp_count;
}

std::string signed_bytes(int64_t d) { return (d > 0 ? "+" : d < 0 ? "-" : "±") + human_bytes(static_cast<uint64_t>(d < 0 ? -d : d)); }
std::string signed_count(int64_t d) { return (d > 0 ? "+" : "") + std::to_string(d); }

int64_t delta(const Entry& e, Metric m) {
  return static_cast<int64_t>(e.s[1].m.value(m)) - static_cast<int64_t>(e.s[0].m.value(m));
}

std::vector<const Entry*> top_changes(const std::map<std::string, Entry>& all, Metric m, std::size_t n) {
  std::vector<const Entry*> v;
  for (const auto& [k, e] : all)
    if (delta(e, m) != 0) v.push_back(&e);
  std::stable_sort(v.begin(), v.end(), [m](const Entry* x, const Entry* y) {
    return std::llabs(delta(*x, m)) > std::llabs(delta(*y, m));
  });
  if (v.size() > n) v.resize(n);
  return v;
}

int run_diff(const DiffOptions& o) {
  auto ma = load_model(o.a, {});
  if (!ma) return kExitError;
  auto mb = load_model(o.b, {});
  if (!mb) return kExitError;
  Symbolizer sa(*ma), sb(*mb);
  std::map<std::string, Entry> all;
  const Model* models[2] = {ma.get(), mb.get()};
  Symbolizer* syms[2] = {&sa, &sb};
  for (int i = 0; i < 2; ++i)
    for (const StackStats& s : models[i]->stacks[0]) {
      Side& side = all[stack_key(*syms[i], s.stack)].s[i];
      add(side.m, s.m);
      if (!side.present) side.stack = s.stack;
      side.present = true;
    }

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
      for (const Entry* e : top_changes(all, r.metric, o.top)) {
        const int side = e->s[1].present ? 1 : 0;
        arr.push_back({{"a_bytes", e->s[0].m.value(r.metric)},
                       {"b_bytes", e->s[1].m.value(r.metric)},
                       {"delta_bytes", delta(*e, r.metric)},
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
    const auto top = top_changes(all, r.metric, o.top);
    if (top.empty()) continue;
    std::printf("\n%s BYTES: largest changes by stack\n", r.name);
    std::size_t i = 0;
    for (const Entry* e : top) {
      const int side = e->s[1].present ? 1 : 0;
      std::string note = !e->s[0].present ? " (only in B)" : !e->s[1].present ? " (only in A)" : "";
      std::printf("  %2zu. %s (%s -> %s)%s\n", ++i, signed_bytes(delta(*e, r.metric)).c_str(),
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
