// `memtide summary --manifest FILE`: the few lines `memtide run` prints after the program
// ended. The manifest (written by the recorder of each process of the run) has one line per
// trace, "pid<TAB>ppid<TAB>path"; the first line is the root process. For each trace:
//
//   /tmp/prog.1234.mtide
//     1,024 allocations, peak heap 1.50 MiB at 0.250 s, 12.0 KiB in 3 blocks not freed
//
// Fast: totals only (no per-stack statistics, no symbols).
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
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

int run_summary(const std::string& manifest) {
  std::ifstream in(manifest);
  if (!in) {
    print_error(manifest, "cannot read the manifest");
    return kExitError;
  }
  std::vector<std::string> paths;
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
    if (seen.insert(path).second) paths.push_back(std::move(path));
  }
  int status = kExitOk;
  for (const std::string& p : paths) {
    ReplayOptions ro;
    ro.per_stack = false;
    ro.series_points = 4;
    AnalyzeResult r = analyze_file(p, ro);
    std::cout << printable(p) << '\n';
    if (!r.ok()) {
      std::cout << "  (unreadable: " << r.error << ")\n";
      status = kExitError;
      continue;
    }
    const Model& m = *r.model;
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
