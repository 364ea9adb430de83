// `memtide report FILE [--json] [--top N] [--from T] [--to T] [--at T] [--frames N] [--growth
// [--warmup T]]`: the analysis of one trace: totals, peak, leaks, and the top stacks by peak, by
// allocations, by leaks and by temporaries, each frame as function, file:line, module; with
// --growth the stacks whose live bytes keep growing (cli/growth_cli.h). With --suppressions
// (or the suppressions= of MEMTIDE_CHECK_OPTIONS), the heap's leaks that a suppression matches
// are left out of the list and counted apart, as `memtide check` sets them aside (the built-in
// suppressions too, unless --no-builtin-suppressions). docs/REPORT_JSON.md is the schema.
//
// Sections: [1] JSON  [2] text  [3] command
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "analysis/attached.h"
#include "analysis/growth.h"
#include "analysis/leaks.h"
#include "analysis/suppressions.h"
#include "cli/analysis_cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/growth_cli.h"

namespace memtide::cli {
namespace {

using namespace memtide::analysis;
using nlohmann::json;

struct ReportOptions {
  std::string file;
  bool json = false;
  bool histogram = false;
  std::size_t top = 10;
  std::size_t frames = 32;
  WindowOptions window;
  bool growth = false;
  GrowthCliOptions growth_opt;
  std::vector<std::string> suppressions;  // files; MEMTIDE_CHECK_OPTIONS' first
  bool no_builtin = false;
  // With suppressions: the list and the heap's leaks split by it (run_report).
  const SuppressionList* supp = nullptr;
  const CountedLeaks* split = nullptr;
};

// The heap's leaks a report lists: the largest `top`, without the suppressed ones.
std::vector<const StackStats*> listed_leaks(const Model& m, const ReportOptions& o) {
  if (!o.split) return top_stacks(m, Domain::Heap, Metric::Leaked, o.top);
  const auto& v = o.split->leaks;
  return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(v.size(), o.top))};
}


// ---------------------------------------------------------------------------------------
// [1] JSON
// ---------------------------------------------------------------------------------------

json rel(const Model& m, uint64_t t) { return t >= m.time_base ? t - m.time_base : 0; }

// The heap's FunctionSpread, made once per report (for the leaks' suggested suppressions; a
// process makes one report, of one model).
const FunctionSpread& spread_of(const Model& m, Symbolizer& sym) {
  static const Model* made_for = nullptr;
  static FunctionSpread spread;
  if (made_for != &m) {
    spread = FunctionSpread(m, sym);
    made_for = &m;
  }
  return spread;
}

// The suggested suppression of a listed leak's stack, made once per report against every leak,
// listed or not (analysis::suggest_suppressions: none hides more than it must).
const Suggestion& suggestion_of(const Model& m, Symbolizer& sym, const ReportOptions& o, StackId id) {
  static const Model* made_for = nullptr;
  static std::unordered_map<uint64_t, Suggestion> made;
  if (made_for != &m) {
    made_for = &m;
    made.clear();
    const std::vector<const StackStats*> listed = listed_leaks(m, o);
    std::vector<std::vector<Frame>> stacks;
    std::unordered_set<uint64_t> seen;
    for (const StackStats* s : listed) {
      stacks.push_back(leaf_first(sym, s->stack));
      seen.insert(s->stack.value);
    }
    for (const StackStats* s : o.split ? o.split->leaks : top_stacks(m, Domain::Heap, Metric::Leaked, SIZE_MAX))
      if (seen.insert(s->stack.value).second) stacks.push_back(leaf_first(sym, s->stack));
    const std::vector<Suggestion> lines = suggest_suppressions(stacks, spread_of(m, sym), listed.size());
    for (std::size_t i = 0; i < lines.size(); ++i) made[listed[i]->stack.value] = lines[i];
  }
  static const Suggestion none;
  auto it = made.find(id.value);
  return it == made.end() ? none : it->second;
}

json stack_items(const Model& m, Symbolizer& sym, Domain d, Metric metric, const ReportOptions& o) {
  json arr = json::array();
  const bool heap_leaks = d == Domain::Heap && metric == Metric::Leaked;
  for (const StackStats* s : heap_leaks ? listed_leaks(m, o) : top_stacks(m, d, metric, o.top)) {
    json j;
    j["bytes"] = metric == Metric::Temporary ? s->m.temp_bytes : s->m.value(metric);
    j["count"] = s->m.blocks(metric);
    if (metric == Metric::Leaked) {
      if (d == Domain::Heap) {
        const Suggestion& x = suggestion_of(m, sym, o, s->stack);
        j["suppression"] = x.line;
        j["suppression_also_hides"] = x.others;
      }
      j["first_alloc_time_ns"] = rel(m, s->m.first_leak_time);
      j["last_alloc_time_ns"] = rel(m, s->m.last_leak_time);
      if (m.kept_from) {  // a kept trace: of these, the blocks allocated before its range
        j["before_range_bytes"] = s->m.before_range_bytes;
        j["before_range_count"] = s->m.before_range_blocks;
      }
      if (m.leak_scan.complete && d == Domain::Heap) {
        const StackMetrics& x = s->m;
        j["definite_bytes"] = x.definite_bytes();
        j["definite_count"] = x.definite_blocks();
        j["indirect_bytes"] = x.indirect_bytes;
        j["indirect_count"] = x.indirect_blocks;
        j["reachable_bytes"] = x.reachable_bytes;
        j["reachable_count"] = x.reachable_blocks;
      }
    }
    if (metric == Metric::Allocated) {
      j["temporary_count"] = s->m.temp_count;
      j["leaked_bytes"] = s->m.leaked_bytes;
    }
    if (m.sampling.sampled() && (metric == Metric::Allocated || metric == Metric::Leaked)) {
      const bool leaked = metric == Metric::Leaked;
      j["samples"] = leaked ? s->m.leaked_samples : s->m.alloc_samples;
      j["bytes_ci95"] = std::llround(ci95(leaked ? s->m.leaked_var : s->m.alloc_var));
    }
    j["stack_id"] = s->stack.value;
    j["stack"] = stack_json(sym, s->stack, o.frames);
    arr.push_back(std::move(j));
  }
  return arr;
}

json domain_json(const Model& m, Symbolizer& sym, Domain d, const ReportOptions& o) {
  const Totals& t = m.totals[static_cast<unsigned>(d)];
  return {{"allocations", t.allocations},
          {"frees", t.frees},
          {"allocated_bytes", t.allocated_bytes},
          {"freed_bytes", t.freed_bytes},
          {"peak_bytes", t.peak_bytes},
          {"peak_blocks", t.peak_blocks},
          {"peak_time_ns", rel(m, t.peak_time)},
          {"leaked_bytes", t.leaked_bytes},
          {"leaked_blocks", t.leaked_blocks},
          {"leaked_before_range_bytes", t.before_range_bytes},
          {"leaked_before_range_blocks", t.before_range_blocks},
          {"unknown_frees", m.anomalies.unknown_free_count[static_cast<unsigned>(d)]},
          {"leaks", stack_items(m, sym, d, Metric::Leaked, o)}};
}

// {bytes, blocks, stacks, suppressions: [{pattern, origin, builtin, stacks, blocks, bytes}]}: what
// the suppressions set aside (each file's and each built-in one that matched), as check's JSON.
json suppressed_json(const ReportOptions& o) {
  if (!o.split) return nullptr;
  json sup = json::array();
  for (const Suppression& x : o.supp->items())
    if (x.stacks || !x.builtin)
      sup.push_back({{"pattern", "leak:" + x.pattern}, {"origin", x.origin}, {"builtin", x.builtin},
                     {"stacks", x.stacks}, {"blocks", x.blocks}, {"bytes", x.bytes}});
  return {{"bytes", o.split->suppressed_bytes},
          {"blocks", o.split->suppressed_blocks},
          {"stacks", o.split->suppressed.size()},
          {"suppressions", sup}};
}

json report_json(const Model& m, Symbolizer& sym, const ReportOptions& o) {
  const Totals& h = m.heap();
  json j;
  j["file"] = o.file;
  j["complete"] = m.complete;
  j["truncated"] = m.truncated;
  j["end"] = m.end ? json{{"reason", fmt::end_reason_name(m.end->reason)},
                          {"status", m.end->status},
                          {"lost_events", m.end->lost_events}}
                   : json(nullptr);
  j["process"] = {{"pid", m.process.pid},
                  {"ppid", m.process.ppid},
                  {"exe", m.process.exe},
                  {"program", program_name(m.process)},
                  {"argv", m.process.argv},
                  {"program_malloc", m.process.program_malloc.empty() ? json(nullptr) : json(m.process.program_malloc)}};
  j["duration_ns"] = m.duration();
  if (m.sampling.sampled()) {
    json changes = json::array();
    for (const SamplingInfo::Change& c : m.sampling.changes)
      changes.push_back({{"time_ns", c.time ? rel(m, c.time) : json(0)}, {"interval_bytes", c.interval}});
    j["sampling"] = {{"interval_bytes", m.sampling.interval()},
                     {"samples", m.sampling.samples},
                     {"allocated_bytes_ci95", std::llround(ci95(m.sampling.allocated_var))},
                     {"changes", changes}};
  } else {
    j["sampling"] = nullptr;
  }
  // (A window's figures are those of a time range in heaptrack_gui: its leaks are judged at its end.)
  j["window"] = m.has_window() ? json{{"from_ns", rel(m, m.window_from)},
                                      {"to_ns", m.window_to == UINT64_MAX ? json(nullptr) : rel(m, m.window_to)},
                                      {"leaked_means", m.kept_from ? "not freed by the end, allocated in the window or before it (the kept range: kept_range)"
                                                                   : "allocated in the window and not freed by its end"}}
                               : json(nullptr);
  // A kept trace whose first segments are gone: its range, and the leaks allocated before it.
  j["kept_range"] = m.kept_from ? json{{"from_ns", rel(m, m.kept_from)},
                                       {"leaked_before_bytes", h.before_range_bytes},
                                       {"leaked_before_blocks", h.before_range_blocks}}
                                : json(nullptr);
  j["threads"] = m.threads.size();
  json threads = json::array();
  for (const ThreadInfo& t : m.threads)
    threads.push_back({{"thread", t.id.value}, {"tid", t.os_tid}, {"name", t.name}, {"allocations", t.allocations},
                       {"frees", t.frees}});
  j["thread_list"] = threads;
  json markers = json::array();
  for (const MarkerInfo& mk : m.markers)
    if (markers.size() < 1000) markers.push_back({{"time_ns", rel(m, mk.time)}, {"thread", mk.thread.value}, {"label", mk.label}});
  j["markers"] = markers;
  j["total_allocations"] = h.allocations;
  j["total_frees"] = h.frees;
  j["total_allocated_bytes"] = h.allocated_bytes;
  j["total_freed_bytes"] = h.freed_bytes;
  j["peak_bytes"] = h.peak_bytes;
  j["peak_blocks"] = h.peak_blocks;
  j["peak_time_ns"] = rel(m, h.peak_time);
  j["leaked_bytes"] = h.leaked_bytes;
  j["leaked_blocks"] = h.leaked_blocks;
  j["leak_scan"] = m.leak_scan.complete
                       ? json{{"definite_bytes", h.definite_bytes()},
                              {"definite_blocks", h.definite_blocks()},
                              {"indirect_bytes", h.indirect_bytes},
                              {"indirect_blocks", h.indirect_blocks},
                              {"reachable_bytes", h.reachable_bytes},
                              {"reachable_blocks", h.reachable_blocks},
                              {"words_scanned", m.leak_scan.words},
                              {"pointers", m.leak_scan.refs},
                              {"duration_ns", m.leak_scan.duration_ns}}
                       : json(nullptr);
  // (A sampled trace cannot tell temporaries: the allocations between a block's own and its
  // free were not all recorded.)
  j["temporary_allocations"] = m.sampling.sampled() ? json(nullptr) : json(h.temporaries);
  j["temporary_bytes"] = m.sampling.sampled() ? json(nullptr) : json(h.temporary_bytes);
  j["peak_rss_bytes"] = m.peak_rss;
  json apis = json::object();
  for (unsigned a = 0; a < fmt::kApiCount; ++a) {
    const ApiCount& al = m.alloc_api[a];
    const ApiCount& fr = m.free_api[a];
    if (al.calls || fr.calls)
      apis[std::string(fmt::api_name(static_cast<fmt::Api>(a)))] = {
          {"allocations", al.calls}, {"allocated_bytes", al.bytes}, {"frees", fr.calls}, {"freed_bytes", fr.bytes}};
  }
  j["apis"] = apis;
  j["unknown_frees"] = m.anomalies.unknown_free_count[0];
  j["attached"] = m.process.attached;
  j["freed_before_recording"] = m.freed_before_recording[0];
  j["mismatched_frees"] = m.anomalies.mismatch_count;
  j["leaks"] = stack_items(m, sym, Domain::Heap, Metric::Leaked, o);
  j["suppressed_leaks"] = suppressed_json(o);
  j["peak_stacks"] = stack_items(m, sym, Domain::Heap, Metric::Peak, o);
  j["top_allocators"] = stack_items(m, sym, Domain::Heap, Metric::Allocated, o);
  j["top_temporary"] = stack_items(m, sym, Domain::Heap, Metric::Temporary, o);
  json mm = json::array();
  for (const Mismatch& x : m.anomalies.mismatches) mm.push_back(mismatch_json(sym, x, o.frames));
  j["mismatches"] = mm;
  json uf = json::array();
  for (const UnknownFree& u : m.anomalies.unknown_frees)
    uf.push_back({{"api", fmt::api_name(u.api)}, {"thread", u.thread.value}, {"count", u.count},
                  {"first_address", u.first_addr}, {"first_time_ns", rel(m, u.first_time)}});
  j["unknown_free_list"] = uf;
  if (m.at_time != UINT64_MAX)
    j["live_at"] = {{"time_ns", rel(m, m.at_time)},
                    {"means", m.has_window() ? "allocated in the window and still live at time_ns" : "live at time_ns"},
                    {"bytes", h.at_bytes},
                    {"blocks", h.at_blocks},
                    {"stacks", stack_items(m, sym, Domain::Heap, Metric::LiveAt, o)}};
  else
    j["live_at"] = nullptr;
  j["mmap"] = domain_json(m, sym, Domain::Mmap, o);
  j["custom"] = domain_json(m, sym, Domain::Custom, o);
  j["warnings"] = m.warnings;
  return j;
}

// ---------------------------------------------------------------------------------------
// [2] Text
// ---------------------------------------------------------------------------------------

std::string percent(uint64_t part, uint64_t whole) {
  if (!whole) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, " (%.1f%%)", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

// "definite 516 B in 2 blocks, indirect 48 B in 2 blocks, still reachable 1.1 KiB in 6 blocks"
// (of a StackMetrics or the Totals).
template <class Leaks>
std::string leak_kinds(const Leaks& x) {
  std::string out;
  auto part = [&](const char* what, uint64_t bytes, uint64_t blocks) {
    if (!blocks) return;
    out += (out.empty() ? "" : ", ") + std::string(what) + " " + human_bytes(bytes) + " in " + count_of(blocks, "block", "blocks");
  };
  part("definite", x.definite_bytes(), x.definite_blocks());
  part("indirect", x.indirect_bytes, x.indirect_blocks);
  part("still reachable", x.reachable_bytes, x.reachable_blocks);
  return out;
}

void row(const char* label, const std::string& v) { std::printf("%-11s %s\n", label, v.c_str()); }

// "± 1.2 MiB, 14 samples": what stands behind an estimate of a sampled trace.
std::string behind(uint64_t samples, double var) {
  std::string out;
  if (const double ci = ci95(var); ci >= 1) out = "± " + human_bytes(static_cast<uint64_t>(std::llround(ci))) + ", ";
  return out + count_of(samples, "sample", "samples");
}

void print_section(const Model& m, Symbolizer& sym, const char* title, Domain d, Metric metric, const ReportOptions& o) {
  const auto top = d == Domain::Heap && metric == Metric::Leaked ? listed_leaks(m, o) : top_stacks(m, d, metric, o.top);
  if (top.empty()) return;
  const bool sampled = m.sampling.sampled();
  std::printf("\n%s\n", title);
  std::size_t i = 0;
  for (const StackStats* s : top) {
    std::string line;
    switch (metric) {
      case Metric::Leaked:
        line = human_bytes(s->m.leaked_bytes) + " in " + count_of(s->m.leaked_blocks, "block", "blocks") +
               (sampled && s->m.leaked_samples ? " (" + behind(s->m.leaked_samples, s->m.leaked_var) + ")" : "") + ", allocated " +
               rel_time(m, s->m.first_leak_time) + " .. " + rel_time(m, s->m.last_leak_time);
        if (m.leak_scan.complete && d == Domain::Heap) line += " (" + leak_kinds(s->m) + ")";
        if (s->m.before_range_blocks)
          line += "; " + count_of(s->m.before_range_blocks, "block", "blocks") + " (" + human_bytes(s->m.before_range_bytes) +
                  ") allocated before the kept range";
        break;
      case Metric::Peak:
        line = human_bytes(s->m.peak_bytes) + " in " + count_of(s->m.peak_blocks, "block", "blocks");
        break;
      case Metric::LiveAt:
        line = human_bytes(s->m.at_bytes) + " in " + count_of(s->m.at_blocks, "block", "blocks");
        break;
      case Metric::Temporary:
        line = thousands(s->m.temp_count) + " temporary of " + count_of(s->m.alloc_count, "allocation", "allocations") +
               " (" + human_bytes(s->m.temp_bytes) + ")";
        break;
      default:
        line = human_bytes(s->m.alloc_bytes) + " in " + count_of(s->m.alloc_count, "allocation", "allocations") +
               (sampled && s->m.alloc_samples ? " (" + behind(s->m.alloc_samples, s->m.alloc_var) + ")" : "");
        break;
    }
    std::printf("  %2zu. %s\n", ++i, line.c_str());
    print_stack(sym, s->stack, o.frames);
    if (metric == Metric::Leaked && d == Domain::Heap) {
      const Suggestion& x = suggestion_of(m, sym, o, s->stack);
      std::printf("      suppress with: %s%s\n", printable(x.line).c_str(),
                  x.others ? ("   (warning: also hides " + count_of(x.others, "other leaking stack", "other leaking stacks") + ")").c_str() : "");
    }
  }
}

// "5 leaks (500 B) suppressed, from 1 stack", then what each suppression hid, as LSan lists the
// suppressions used, and the suppressions of the files that matched nothing.
void print_suppressed(const CountedLeaks& split, const SuppressionList& supp) {
  std::printf("\nSUPPRESSED LEAKS: %s (%s) suppressed, from %s\n", count_of(split.suppressed_blocks, "leak", "leaks").c_str(),
              human_bytes(split.suppressed_bytes).c_str(), count_of(split.suppressed.size(), "stack", "stacks").c_str());
  for (const Suppression& x : supp.items())
    if (x.stacks)
      std::printf("  leak:%s (%s): %s, %s, %s\n", printable(x.pattern).c_str(), printable(x.origin).c_str(),
                  count_of(x.stacks, "stack", "stacks").c_str(), count_of(x.blocks, "block", "blocks").c_str(),
                  human_bytes(x.bytes).c_str());
  for (const Suppression& x : supp.items())
    if (!x.builtin && !x.stacks) std::printf("  unused: leak:%s (%s)\n", printable(x.pattern).c_str(), printable(x.origin).c_str());
}

void report_text(const Model& m, Symbolizer& sym, const ReportOptions& o) {
  const Totals& h = m.heap();
  std::string state = m.complete ? std::string("complete") : m.truncated ? "truncated" : "incomplete (no end record)";
  if (m.end && m.end->reason == fmt::EndReason::Signal)
    state += ", killed by signal " + std::to_string(m.end->status);
  else if (m.end && m.end->reason == fmt::EndReason::Detach)
    state += ", detached while the program went on";
  else if (m.end)
    state += std::string(", ") + std::string(fmt::end_reason_name(m.end->reason)) + " status " + std::to_string(m.end->status);
  row("trace", printable(o.file) + " (" + state + ")");
  if (m.have_process)
    row("program", printable(program_label(m.process)) + ", pid " + std::to_string(m.process.pid) + ", " +
                       count_of(m.threads.size(), "thread", "threads") + ", ran " + format_duration(m.duration()));
  if (const std::string note = unrecorded_allocations_note(m.process); m.have_process && !note.empty())
    row("note", printable(note));
  if (const std::string note = attached_note(m); !note.empty()) row("note", printable(note));
  if (m.sampling.sampled()) {
    std::string what = "1 in ~" + human_bytes(m.sampling.interval()) + " allocated, " +
                       count_of(m.sampling.samples, "sample", "samples") +
                       ": the heap's figures are estimates (± a 95% interval where given)";
    if (m.sampling.changes.size() > 1 || m.sampling.changes.front().time != 0) {
      what += "; switched";
      for (const SamplingInfo::Change& c : m.sampling.changes)
        what += (c.interval ? " to 1 in ~" + human_bytes(c.interval) : std::string(" to exact")) + " at " + rel_time(m, c.time) + ",";
      what.pop_back();
    }
    row("sampling", what);
  }
  if (m.kept_from)
    row("range", "kept from " + rel_time(m, m.kept_from) + ": allocations made since; leaked: not freed by the end, " +
                     count_of(h.before_range_blocks, "block", "blocks") + " (" + human_bytes(h.before_range_bytes) +
                     ") of them allocated before it");
  else if (m.has_window())
    row("window", "allocations made in [" + rel_time(m, m.window_from) + ", " +
                      (m.window_to == UINT64_MAX ? std::string("end") : rel_time(m, m.window_to)) +
                      "]; leaked: not freed by the window's end");
  if (m.sampling.sampled())
    row("heap", count_of(h.allocations, "allocation", "allocations") + " (" + human_bytes(h.allocated_bytes) + " " +
                    behind(m.sampling.samples, m.sampling.allocated_var) + "), " +
                    count_of(h.frees, "free", "frees") + ", temporaries not known when sampled");
  else
    row("heap", count_of(h.allocations, "allocation", "allocations") + " (" + human_bytes(h.allocated_bytes) + "), " +
                    count_of(h.frees, "free", "frees") + ", " + thousands(h.temporaries) + " temporary" +
                    percent(h.temporaries, h.allocations));
  row("peak", human_bytes(h.peak_bytes) + " in " + count_of(h.peak_blocks, "block", "blocks") + " at " +
                  rel_time(m, h.peak_time));
  {
    std::string leaked = human_bytes(h.leaked_bytes) + " in " + count_of(h.leaked_blocks, "block", "blocks");
    if (m.leak_scan.complete) leaked += " not freed: " + leak_kinds(h);
    if (o.split)
      leaked += "; " + count_of(o.split->suppressed_blocks, "leak", "leaks") + " (" +
                human_bytes(o.split->suppressed_bytes) + ") suppressed";
    row("leaked", leaked);
  }
  for (Domain d : {Domain::Mmap, Domain::Custom}) {
    const Totals& t = m.totals[static_cast<unsigned>(d)];
    if (!t.allocations && !t.frees) continue;
    row(domain_name(d), count_of(t.allocations, "allocation", "allocations") + " (" + human_bytes(t.allocated_bytes) + "), peak " +
                            human_bytes(t.peak_bytes) + ", not freed " + human_bytes(t.leaked_bytes) + " in " +
                            count_of(t.leaked_blocks, "block", "blocks"));
  }
  if (m.peak_rss) row("rss", "peak " + human_bytes(m.peak_rss));
  std::string anomalies;
  if (m.anomalies.mismatch_count) anomalies += count_of(m.anomalies.mismatch_count, "mismatched free", "mismatched frees");
  uint64_t unknown = 0;
  for (uint64_t n : m.anomalies.unknown_free_count) unknown += n;
  if (unknown)
    anomalies += (anomalies.empty() ? "" : ", ") + count_of(unknown, "free of an unknown address", "frees of unknown addresses");
  if (!anomalies.empty()) row("anomalies", anomalies);

  std::printf("\n%-18s %12s %12s %12s\n", "by API", "allocations", "bytes", "releases");
  for (unsigned a = 0; a < fmt::kApiCount; ++a) {
    const ApiCount& al = m.alloc_api[a];
    const ApiCount& fr = m.free_api[a];
    if (!al.calls && !fr.calls) continue;
    std::printf("  %-16s %12s %12s %12s\n", std::string(fmt::api_name(static_cast<fmt::Api>(a))).c_str(),
                al.calls ? thousands(al.calls).c_str() : "-", al.calls ? human_bytes(al.bytes).c_str() : "-",
                fr.calls ? thousands(fr.calls).c_str() : "-");
  }

  print_section(m, sym,
                m.kept_from ? "LEAKS (not freed at the end, by stack; including those allocated before the kept range)"
                : m.has_window() && m.window_to != UINT64_MAX ? "LEAKS (made in the window, not freed by its end, by stack)"
                                                            : "LEAKS (not freed at the end, by stack)",
                Domain::Heap, Metric::Leaked, o);
  if (o.split) print_suppressed(*o.split, *o.supp);
  print_section(m, sym, "PEAK (live at the high-water mark, by stack)", Domain::Heap, Metric::Peak, o);
  if (m.at_time != UINT64_MAX) {
    const std::string title = "LIVE AT " + rel_time(m, m.at_time) + " (" + human_bytes(h.at_bytes) + " in " +
                              count_of(h.at_blocks, "block", "blocks") +
                              (m.has_window() ? ", made in the window" : "") + ", by stack)";
    print_section(m, sym, title.c_str(), Domain::Heap, Metric::LiveAt, o);
  }
  print_section(m, sym, "ALLOCATIONS (bytes allocated, by stack)", Domain::Heap, Metric::Allocated, o);
  if (!m.sampling.sampled())
    print_section(m, sym, "TEMPORARIES (freed right after allocation, by stack)", Domain::Heap, Metric::Temporary, o);
  print_section(m, sym, "MMAP NOT UNMAPPED (by stack)", Domain::Mmap, Metric::Leaked, o);
  print_section(m, sym, "CUSTOM POOL BLOCKS NOT FREED (by stack)", Domain::Custom, Metric::Leaked, o);
  if (!m.anomalies.mismatches.empty()) {
    std::printf("\nMISMATCHED FREES\n");
    std::size_t i = 0;
    for (const Mismatch& x : m.anomalies.mismatches) {
      if (i == o.top) break;
      std::printf("  %2zu. %s block freed with %s: %s (%s)\n", ++i, std::string(fmt::api_name(x.alloc_api)).c_str(),
                  std::string(fmt::api_name(x.free_api)).c_str(), count_of(x.count, "time", "times").c_str(),
                  human_bytes(x.bytes).c_str());
      print_stack(sym, x.stack, o.frames);
    }
  }
  if (!m.anomalies.unknown_frees.empty()) {
    std::printf("\nFREES OF UNKNOWN ADDRESSES (allocated before recording, while paused, or freed twice)\n");
    std::size_t i = 0;
    for (const UnknownFree& u : m.anomalies.unknown_frees) {
      if (i++ == o.top) break;
      std::printf("  %s on thread %u: %s (first 0x%llx at %s)\n", std::string(fmt::api_name(u.api)).c_str(),
                  u.thread.value, count_of(u.count, "time", "times").c_str(), static_cast<unsigned long long>(u.first_addr),
                  rel_time(m, u.first_time).c_str());
    }
  }
}

// ---------------------------------------------------------------------------------------
// [3] Command
// ---------------------------------------------------------------------------------------

// The suppressions= and no-builtin-suppressions entries of MEMTIDE_CHECK_OPTIONS, before the
// command line's: the report hides what the gate hides. Its other entries are check's own.
std::string suppressions_from_env(ReportOptions& o) {
  std::vector<std::string> words;
  if (std::string err = check_options_from_env(words); !err.empty()) return std::string(kCheckOptionsEnv) + ": " + err;
  std::vector<std::string> files;
  for (const std::string& w : words) {
    if (w.rfind("--suppressions=", 0) == 0) files.push_back(w.substr(15));
    if (w == "--no-builtin-suppressions") o.no_builtin = true;
  }
  o.suppressions.insert(o.suppressions.begin(), files.begin(), files.end());
  return "";
}

int run_report(ReportOptions o) {
  SuppressionList supp;
  {
    std::vector<std::string> notes;
    std::string err = suppressions_from_env(o);
    // The built-in suppressions by default, as check applies them: both list the same leaks.
    if (err.empty() && !o.suppressions.empty()) load_suppressions(supp, o.suppressions, !o.no_builtin, err, notes);
    else if (!o.no_builtin) supp.add_builtin();
    if (!err.empty()) {
      std::cerr << "memtide: " << printable(err) << '\n';
      return kExitError;
    }
    for (const std::string& n : notes) std::cerr << "memtide: note: " << printable(n) << '\n';
  }
  ReplayOptions ro;
  o.window.apply(ro);
  ro.stack_history = o.growth;
  SymbolPreload preload;
  auto model = load_model(o.file, ro, false, &preload);
  if (!model) return kExitError;
  Symbolizer sym(*model, {}, &preload);
  if (!model->leak_scan.program_suppressions.empty()) {  // the program's __lsan_default_suppressions()
    std::string err;
    std::vector<std::string> notes;
    if (!supp.parse(model->leak_scan.program_suppressions, "__lsan_default_suppressions()", err, notes))
      std::cerr << "memtide: " << printable(o.file) << ": warning: the program's suppressions: " << printable(err) << '\n';
  }
  CountedLeaks split;
  if (!supp.items().empty()) {
    split = count_leaks(*model, sym, supp, false);
    o.supp = &supp;
    o.split = &split;
  }
  const Growth growth = o.growth ? analyze_growth(*model, o.growth_opt.options()) : Growth{};
  if (o.json) {
    json j = report_json(*model, sym, o);
    j["growth"] = o.growth ? growth_json(*model, growth, sym, o.top, o.frames) : json(nullptr);
    j["growth_window"] = o.growth ? growth_window_json(*model, growth, o.growth_opt, sym, o.top, o.frames) : json(nullptr);
    std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
  } else {
    report_text(*model, sym, o);
    if (o.growth) print_growth(*model, growth, sym, o.top, o.frames);
  }
  std::cout.flush();
  print_symbol_problems(o.file, sym);
  return kExitOk;
}

}  // namespace

Command report_command() {
  return {"report", "Analyse a trace: totals, peak, leaks, top stacks by peak, allocations, leaks, temporaries",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<ReportOptions>();
            sub.add_option("file", o->file, "Trace file (.mtide)")->required();
            sub.add_flag("--json", o->json, "Print the report as JSON (schema: docs/REPORT_JSON.md)");
            sub.add_option("--top", o->top, "Stacks listed per section (default 10)")->check(CLI::Range(1, 1000000));
            sub.add_option("--frames", o->frames, "Frames printed per stack (default 32)")->check(CLI::Range(1, 100000));
            sub.add_flag("--histogram", o->histogram,
                         "Print instead the heap allocations by size, in power-of-two classes (with --json: as JSON; with "
                         "--from/--to: those made in the window)");
            o->window.declare(sub, true);
            auto* growth = sub.add_flag("--growth", o->growth,
                                        "Also list the stacks whose live bytes keep growing after a warm-up (a "
                                        "worker's leaks), told apart from caches that fill and hold");
            o->growth_opt.declare(sub)->needs(growth);
            sub.add_option("--suppressions", o->suppressions,
                           "Leave out of the leaks those a LeakSanitizer-format suppressions file matches (leak:<glob>), "
                           "and the built-in ones, and count them apart (as check does); repeatable")
                ->check(CLI::ExistingFile);
            sub.add_flag("--no-builtin-suppressions", o->no_builtin,
                         "With --suppressions: do not hide the known one-time allocations of glibc and libstdc++");
            add_alloc_fn_option(sub);
            return [o] {
              if (!o->histogram) return run_report(*o);
              if (!o->window.at.empty()) {
                print_error(o->file, "--histogram counts allocations made: it takes --from and --to, not --at");
                return kExitError;
              }
              analysis::ReplayOptions window;
              o->window.apply(window);
              return print_histogram(o->file, o->json, window.from, window.to);
            };
          }};
}

}  // namespace memtide::cli
