// `memtide summary --manifest FILE`: the few lines `memtide run` prints after the program
// ended. The manifest (written by the recorder of each process of the run) has one line per
// trace, "pid<TAB>ppid<TAB>path"; the first line is the root process. For each trace:
//
//   /tmp/prog.1234.mtide
//     1,024 allocations, peak heap 1.50 MiB at 0.250 s, 12.0 KiB in 3 blocks not freed
//
// (at most kShown traces; the others in one line, below)
//
// Fast: totals only (no per-stack statistics, no symbols).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "cli/analysis_cli.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace memtide::cli {
namespace {

using namespace memtide::analysis;

std::string with_commas(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

// A run of a shell script or of a launcher (pyenv's shims are bash scripts) can start dozens of
// short processes, each with its trace; the summary names at most kShown of them: the last
// trace of the root process (the program the user named, after its execs), every trace that
// could not be read, and the busiest others, in the manifest's order. The rest are counted in
// one line, by program.
constexpr std::size_t kShown = 8;

struct Entry {
  std::string path, pid;
  std::string text;  // its lines (the trace's model is not kept: a run may have many big traces)
  std::string exe;   // the program's file name
  uint64_t allocations = 0;
  bool ok = false, shown = false;
};

void describe(Entry& e, const AnalyzeResult& r) {
  std::ostringstream out;
  out << printable(e.path) << '\n';
  e.ok = r.ok();
  if (!e.ok) {
    out << "  (unreadable: " << r.error << ")\n";
    e.text = out.str();
    return;
  }
  const Model& m = *r.model;
  const Totals& h = m.heap();
  e.allocations = h.allocations;
  e.exe = m.process.exe.substr(m.process.exe.rfind('/') + 1);
  out << "  " << with_commas(h.allocations) << " allocations, peak heap " << human_bytes(h.peak_bytes) << " at "
      << rel_time(m, h.peak_time) << ", " << human_bytes(h.leaked_bytes) << " in " << with_commas(h.leaked_blocks)
      << " blocks not freed";
  if (m.leak_scan.complete)
    out << " (" << human_bytes(h.leaked_bytes - h.reachable_bytes) << " unreachable, " << human_bytes(h.reachable_bytes)
        << " still reachable)";
  if (m.truncated) out << " (truncated trace)";
  else if (!m.complete) out << " (no end record)";
  else if (m.end && m.end->reason == fmt::EndReason::Detached) out << " (recording stopped at the size limit)";
  out << '\n';
  e.text = out.str();
}

// "12 true, 2 sh": the programs of the traces not shown, the most frequent first.
std::string programs_of(const std::vector<Entry>& entries) {
  std::map<std::string, std::size_t> count;
  for (const Entry& e : entries) {
    if (e.shown) continue;
    ++count[e.exe.empty() ? "?" : e.exe];
  }
  std::vector<std::pair<std::string, std::size_t>> order(count.begin(), count.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [exe, n] : order) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + printable(exe);
  return out;
}

int run_summary(const std::string& manifest) {
  std::ifstream in(manifest);
  if (!in) {
    print_error(manifest, "cannot read the manifest");
    return kExitError;
  }
  std::vector<Entry> entries;
  std::set<std::string> seen;
  std::string line;
  std::size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    std::string path;
    if (!manifest_trace_path(line, path)) {
      print_error(manifest, "line " + std::to_string(lineno) + ": expected pid<TAB>ppid<TAB>path");
      return kExitError;
    }
    if (seen.insert(path).second) {
      Entry e;
      e.pid = line.substr(0, line.find('\t'));
      e.path = std::move(path);
      entries.push_back(std::move(e));
    }
  }
  int status = kExitOk;
  for (Entry& e : entries) {
    ReplayOptions ro;
    ro.per_stack = false;
    ro.series_points = 4;
    describe(e, analyze_file(e.path, ro));
    if (!e.ok) status = kExitError;
  }
  if (entries.size() <= kShown) {
    for (Entry& e : entries) e.shown = true;
  } else {
    std::size_t shown = 0;
    auto show = [&](Entry& e) {
      if (!e.shown) ++shown;
      e.shown = true;
    };
    for (auto it = entries.rbegin(); it != entries.rend(); ++it)
      if (it->pid == entries.front().pid) {
        show(*it);
        break;
      }
    for (Entry& e : entries)
      if (!e.ok) show(e);
    std::vector<Entry*> busiest;
    for (Entry& e : entries) busiest.push_back(&e);
    std::stable_sort(busiest.begin(), busiest.end(), [](const Entry* a, const Entry* b) { return a->allocations > b->allocations; });
    for (Entry* e : busiest)
      if (shown < kShown) show(*e);
  }
  std::size_t hidden = 0;
  uint64_t hidden_allocations = 0;
  for (const Entry& e : entries) {
    if (e.shown) std::cout << e.text;
    else {
      ++hidden;
      hidden_allocations += e.allocations;
    }
  }
  if (hidden) {
    const auto slash = entries.front().path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : entries.front().path.substr(0, slash);
    std::cout << "and " << hidden << " more traces in " << printable(dir) << " (" << programs_of(entries) << "), "
              << with_commas(hidden_allocations) << " allocations in all\n";
  }
  return status;
}

}  // namespace

Command summary_command() {
  return {"summary", "One line per trace of a `memtide run` manifest (used by the wrapper)",
          [](CLI::App& sub) -> std::function<int()> {
            auto manifest = std::make_shared<std::string>();
            sub.add_option("--manifest", *manifest, "Manifest: lines of pid<TAB>ppid<TAB>trace path, root first")
                ->required();
            return [manifest] { return run_summary(*manifest); };
          }};
}

}  // namespace memtide::cli
