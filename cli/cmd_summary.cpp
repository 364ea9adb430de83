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
  AnalyzeResult result;
  uint64_t allocations = 0;
  bool shown = false;
};

void print_entry(const Entry& e) {
  std::cout << printable(e.path) << '\n';
  if (!e.result.ok()) {
    std::cout << "  (unreadable: " << e.result.error << ")\n";
    return;
  }
  const Model& m = *e.result.model;
  const Totals& h = m.heap();
  std::cout << "  " << with_commas(h.allocations) << " allocations, peak heap " << human_bytes(h.peak_bytes) << " at "
            << rel_time(m, h.peak_time) << ", " << human_bytes(h.leaked_bytes) << " in " << with_commas(h.leaked_blocks)
            << " blocks not freed";
  if (m.leak_scan.complete)
    std::cout << " (" << human_bytes(h.leaked_bytes - h.reachable_bytes) << " unreachable, "
              << human_bytes(h.reachable_bytes) << " still reachable)";
  if (m.truncated) std::cout << " (truncated trace)";
  else if (!m.complete) std::cout << " (no end record)";
  else if (m.end && m.end->reason == fmt::EndReason::Detached) std::cout << " (recording stopped at the size limit)";
  std::cout << '\n';
}

// "12 true, 2 sh": the programs of the traces not shown, the most frequent first.
std::string programs_of(const std::vector<Entry>& entries) {
  std::map<std::string, std::size_t> count;
  for (const Entry& e : entries) {
    if (e.shown) continue;
    std::string exe = e.result.ok() ? e.result.model->process.exe : std::string();
    if (const auto slash = exe.rfind('/'); slash != std::string::npos) exe.erase(0, slash + 1);
    ++count[exe.empty() ? "?" : exe];
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
    if (seen.insert(path).second) entries.push_back(Entry{std::move(path), line.substr(0, line.find('\t')), {}, 0, false});
  }
  int status = kExitOk;
  for (Entry& e : entries) {
    ReplayOptions ro;
    ro.per_stack = false;
    ro.series_points = 4;
    e.result = analyze_file(e.path, ro);
    if (e.result.ok()) e.allocations = e.result.model->heap().allocations;
    else status = kExitError;
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
      if (!e.result.ok()) show(e);
    std::vector<Entry*> busiest;
    for (Entry& e : entries) busiest.push_back(&e);
    std::stable_sort(busiest.begin(), busiest.end(), [](const Entry* a, const Entry* b) { return a->allocations > b->allocations; });
    for (Entry* e : busiest)
      if (shown < kShown) show(*e);
  }
  std::size_t hidden = 0;
  uint64_t hidden_allocations = 0;
  for (const Entry& e : entries) {
    if (e.shown) print_entry(e);
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
