#include "cli/run_summary.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "cli/analysis_cli.h"
#include "cli/common.h"

namespace memtide::cli {

using namespace memtide::analysis;

namespace {

// A run of a shell script or of a launcher (pyenv's shims are bash scripts) can start dozens of
// short processes, each with its trace; the summary names at most kShown of them: the last
// trace of the root process (the program the user named, after its execs), every trace that
// could not be read, and the busiest others, in the manifest's order. The rest are counted in
// one line, by program.
constexpr std::size_t kShown = 8;

// "12 true, 2 sh": the programs of the traces not shown, the most frequent first.
std::string programs_of(const std::vector<SummaryEntry>& entries) {
  std::map<std::string, std::size_t> count;
  for (const SummaryEntry& e : entries) {
    if (e.shown) continue;
    ++count[e.exe.empty() ? "?" : e.exe];
  }
  std::vector<std::pair<std::string, std::size_t>> order(count.begin(), count.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [exe, n] : order) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + printable(exe);
  return out;
}

}  // namespace

ReplayOptions summary_replay_options() {
  ReplayOptions ro;
  ro.per_stack = false;
  ro.series_points = 4;
  return ro;
}

void describe(SummaryEntry& e, const AnalyzeResult& r) {
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
  e.exe = program_name(m.process);
  out << "  " << thousands(h.allocations) << " allocations, peak heap " << human_bytes(h.peak_bytes) << " at "
      << rel_time(m, h.peak_time) << ", " << human_bytes(h.leaked_bytes) << " in " << count_of(h.leaked_blocks, "block", "blocks")
      << " not freed";
  if (m.leak_scan.complete)
    out << " (" << human_bytes(h.leaked_bytes - h.reachable_bytes) << " unreachable, " << human_bytes(h.reachable_bytes)
        << " still reachable)";
  if (m.truncated) out << " (truncated trace)";
  else if (!m.complete) out << " (no end record)";
  else if (m.end && m.end->reason == fmt::EndReason::Detached) out << " (recording stopped at the size limit)";
  else if (m.end && m.end->reason == fmt::EndReason::Detach) out << " (recorded from attach to detach: not freed by then)";
  out << '\n';
  e.text = out.str();
}


void print_summary(std::vector<SummaryEntry>& entries, std::ostream& out) {
  if (entries.empty()) return;
  if (entries.size() <= kShown) {
    for (SummaryEntry& e : entries) e.shown = true;
  } else {
    std::size_t shown = 0;
    auto show = [&](SummaryEntry& e) {
      if (!e.shown) ++shown;
      e.shown = true;
    };
    for (auto it = entries.rbegin(); it != entries.rend(); ++it)
      if (it->pid == entries.front().pid) {
        show(*it);
        break;
      }
    for (SummaryEntry& e : entries)
      if (!e.ok) show(e);
    std::vector<SummaryEntry*> busiest;
    for (SummaryEntry& e : entries) busiest.push_back(&e);
    std::stable_sort(busiest.begin(), busiest.end(),
                     [](const SummaryEntry* a, const SummaryEntry* b) { return a->allocations > b->allocations; });
    for (SummaryEntry* e : busiest)
      if (shown < kShown) show(*e);
  }
  std::size_t hidden = 0;
  uint64_t hidden_allocations = 0;
  for (const SummaryEntry& e : entries) {
    if (e.shown) out << e.text;
    else {
      ++hidden;
      hidden_allocations += e.allocations;
    }
  }
  if (hidden) {
    const auto slash = entries.front().path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : entries.front().path.substr(0, slash);
    out << "and " << hidden << " more traces in " << printable(dir) << " (" << programs_of(entries) << "), "
        << thousands(hidden_allocations) << " allocations in all\n";
  }
}

}  // namespace memtide::cli
