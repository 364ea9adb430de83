// `memtide summary --manifest FILE`: the few lines `memtide run` prints after the program
// ended. The manifest (written by the recorder of each process of the run) has one line per
// trace, "pid<TAB>ppid<TAB>path"; the first line is the root process. For each trace:
//
//   /tmp/prog.1234.mtide
//     1,024 allocations, peak heap 1.50 MiB at 0.250 s, 12.0 KiB in 3 blocks not freed
//
// (cli/run_summary.h). This command replays each trace (totals only); `memtide run` prints the
// lines its follower kept while the program ran, and calls this only when there was none.
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <set>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/run_summary.h"

namespace memtide::cli {
namespace {

int run_summary(const std::string& manifest) {
  std::ifstream in(manifest);
  if (!in) {
    print_error(manifest, "cannot read the manifest");
    return kExitError;
  }
  std::vector<SummaryEntry> entries;
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
      SummaryEntry e;
      e.pid = line.substr(0, line.find('\t'));
      e.path = std::move(path);
      entries.push_back(std::move(e));
    }
  }
  int status = kExitOk;
  for (SummaryEntry& e : entries) {
    describe(e, analysis::analyze_file(e.path, summary_replay_options()));
    if (!e.ok) status = kExitError;
  }
  print_summary(entries, std::cout);
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
