// `memtide check FILE`: the CI leak gate.
//
//   exit 0  within every limit          exit 1  a limit is broken (offending stacks printed,
//   exit 2  usage or file error                 largest first, readable in a CI log: the
//                                               leaking ones, and for the peak limit the
//                                               stacks of the blocks live at the peak)
//
// Leaks are heap blocks (malloc family, new/delete) not freed when the trace ended (when the
// trace has a complete leak scan, analysis/reach.h: only those unreachable at exit, definite
// and indirect, unless --include-reachable), minus those whose stack matches a suppression
// (LSan format, see analysis/suppressions.h, plus the built-in ones unless
// --no-builtin-suppressions). The report says what each suppression hid.
// --max-growth RATE judges a worker by growth instead (analysis/growth.h): the live heap bytes of
// the stacks that keep growing after a warm-up, per minute; given alone, leaks are not judged
// (a worker never exits) and a trace cut short is judged on what it holds.
// --junit writes a JUnit XML file (one test case per process); --json prints JSON instead of text.
// --error-exitcode sets the status of a broken limit, --gen-suppressions prints the lines that
// would hide each leak, --keep-traces=failed removes the traces that passed. A directory
// stands for its traces. MEMTIDE_CHECK_OPTIONS gives options too (main.cpp).
//
// Sections: [1] evaluation  [2] text  [3] JSON  [4] JUnit  [5] command
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/growth.h"
#include "analysis/leaks.h"
#include "analysis/suppressions.h"
#include "analysis/xml.h"
#include "cli/analysis_cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/growth_cli.h"
#include "formats/size.h"

namespace memtide::cli {
namespace {

using namespace memtide::analysis;
using nlohmann::json;

struct CheckOptions {
  std::vector<std::string> files;  // each judged on its own (memtide run: every process's trace)
  std::string file;                // the one being judged
  std::string max_leaked_bytes, max_leaked_blocks, max_peak_bytes;  // empty: not set
  std::string max_mismatched_frees;                                 // empty: 0 while leaks are judged
  std::string max_growth;                                           // empty: not set
  GrowthCliOptions growth;
  std::vector<std::string> suppressions;
  bool no_builtin = false;
  bool include_reachable = false;
  bool allow_incomplete = false;  // judge what a trace cut short holds
  std::string junit;
  bool json = false;
  bool options_only = false;  // check the options and stop (memtide run, before the program)
  std::size_t top = 20;
  std::size_t frames = 24;
  int error_exitcode = 1;       // a broken limit's exit status (a test's own failure is another)
  bool gen_suppressions = false;  // a suppression block per leaking stack, to paste
  std::string keep_traces = "all";  // "failed": remove the traces of processes that passed
};

// ---------------------------------------------------------------------------------------
// [1] Evaluation
// ---------------------------------------------------------------------------------------

struct Leak {
  const StackStats* s;
};

struct Limit {
  std::string name;      // "max-leaked-bytes"
  std::string what;      // "leaked bytes"
  bool set = false;
  uint64_t limit = 0, actual = 0;
  bool is_bytes = true;
  bool is_rate = false;  // bytes per minute
  bool broken() const { return set && actual > limit; }
  std::string value(uint64_t v) const {
    return is_rate ? human_rate(static_cast<double>(v)) : is_bytes ? human_bytes(v) : thousands(v);
  }
};

struct Evaluation : CountedLeaks {
  // Per leaking stack, what counts (CountedLeaks): with a complete leak scan, its definite and
  // indirect leaks (unless --include-reachable), else every block not freed; `leaks` are the
  // unsuppressed ones.
  bool scanned = false;                  // leaks are the unreachable blocks
  bool exec_ended = false;               // the image was replaced by exec: nothing leaked
  std::vector<Limit> limits;
  // When the mismatched frees' limit is broken: each kind of mismatch and its allocation's stack.
  const std::vector<Mismatch>* mismatches = nullptr;
  // When the peak limit is broken: the stacks of the blocks live at the peak, largest first.
  std::vector<const StackStats*> peak_stacks;
  bool leaks_judged = true;  // not with --max-growth alone
  std::optional<Growth> growth;  // with --max-growth
  bool failed() const {
    for (const Limit& l : limits)
      if (l.broken()) return true;
    return false;
  }
};

// Whether leaks are judged: not when the only limits are growth (and the peak).
bool judges_leaks(const CheckOptions& o) {
  return !o.max_leaked_bytes.empty() || !o.max_leaked_blocks.empty() || o.max_growth.empty();
}

Evaluation evaluate(const Model& m, Symbolizer& sym, SuppressionList& supp, const CheckOptions& o, std::optional<Growth> growth) {
  Evaluation e;
  e.leaks_judged = judges_leaks(o);
  e.growth = std::move(growth);
  e.scanned = m.leak_scan.complete && !o.include_reachable;
  // An image that exec'd another program leaked nothing: its memory went with it (the blocks it
  // had not freed are still listed by the report). The new program has its own trace.
  e.exec_ended = m.end && m.end->reason == fmt::EndReason::Exec;
  if (!e.exec_ended && e.leaks_judged) static_cast<CountedLeaks&>(e) = count_leaks(m, sym, supp, e.scanned);
  auto limit = [](const std::string& name, const std::string& what, const std::string& value, uint64_t actual, bool bytes) {
    Limit l{name, what, !value.empty(), 0, actual, bytes};
    if (l.set) l.limit = *parse_size(value);  // validated by the option's check
    return l;
  };
  // With no leak limit given, any leaked block fails: a leaked byte breaks the bytes' limit, and
  // blocks of 0 bytes (malloc(0)), when they are all there is, the blocks' limit.
  const bool no_leak_limit = o.max_leaked_bytes.empty() && o.max_leaked_blocks.empty();
  e.limits.push_back(limit("max-leaked-bytes", "leaked bytes", no_leak_limit && e.leaks_judged ? "0" : o.max_leaked_bytes,
                           e.leaked_bytes, true));
  e.limits.push_back(limit("max-leaked-blocks", "leaked blocks",
                           no_leak_limit && e.leaks_judged && e.leaked_bytes == 0 ? "0" : o.max_leaked_blocks,
                           e.leaked_blocks, false));
  // A block released by another family's call (new[] by delete, malloc by delete, new by free)
  // fails as a leak does, as each is an error of memcheck's.
  e.limits.push_back(limit("max-mismatched-frees", "mismatched frees",
                           o.max_mismatched_frees.empty() && e.leaks_judged ? "0" : o.max_mismatched_frees,
                           m.anomalies.mismatch_count, false));
  if (e.limits.back().broken()) e.mismatches = &m.anomalies.mismatches;
  e.limits.push_back(limit("max-peak-bytes", "peak heap bytes", o.max_peak_bytes, m.heap().peak_bytes, true));
  if (e.limits.back().broken()) e.peak_stacks = top_stacks(m, Domain::Heap, Metric::Peak, SIZE_MAX);
  if (e.growth) {
    Limit l{"max-growth", "heap growth", true, static_cast<uint64_t>(std::llround(*parse_rate(o.max_growth))),
            static_cast<uint64_t>(std::llround(e.growth->bytes_per_min)), false};
    l.is_rate = true;
    e.limits.push_back(l);
  }
  return e;
}

// ---------------------------------------------------------------------------------------
// [2] Text
// ---------------------------------------------------------------------------------------

// For the terminal (`tty`: styled, frame_line) or a file (JUnit, suppressions: whole names).
std::string stack_text(Symbolizer& sym, StackId id, std::size_t max_frames, const char* indent, bool tty = false) {
  const auto frames = leaf_first(sym, id);
  std::string out = site_line(frames, indent, tty);
  std::size_t i = 0;
  for (const Frame& f : frames) {
    if (i == max_frames) {
      out += std::string(indent) + "... " + count_of(frames.size() - i, "more frame", "more frames") + "\n";
      break;
    }
    out += (tty ? frame_line(f, indent, i++) : std::string(indent) + "#" + std::to_string(i++) + " " + printable(format_frame(f))) + "\n";
  }
  return out;
}

// --gen-suppressions: per leaking stack, its stack as comments and the line that hides it, a
// block to paste into a suppressions file as it is.
// The suggested line of each leak (of the first `count`), against all of them (analysis::
// suggest_suppressions: none hides more than it must).
std::vector<Suggestion> leak_suggestions(const Model& m, Symbolizer& sym, const Evaluation& e, std::size_t count) {
  const FunctionSpread spread(m, sym);
  std::vector<std::vector<Frame>> stacks;
  stacks.reserve(e.leaks.size());
  for (const StackStats* s : e.leaks) stacks.push_back(leaf_first(sym, s->stack));
  return suggest_suppressions(stacks, spread, count);
}

void print_suppressions(const Model& m, Symbolizer& sym, const Evaluation& e, const CheckOptions& o) {
  const std::vector<Suggestion> lines = leak_suggestions(m, sym, e, o.top);
  std::printf("\nsuppressions (--gen-suppressions), one block per leaking stack:\n");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const StackStats* s = e.leaks[i];
    std::printf("\n# %s in %s leaked by %s\n", human_bytes(s->m.leaked_bytes).c_str(),
                count_of(s->m.leaked_blocks, "block", "blocks").c_str(), printable(program_name(m.process)).c_str());
    std::fputs(stack_text(sym, s->stack, std::min<std::size_t>(o.frames, 8), "#   ").c_str(), stdout);
    if (lines[i].others)
      std::printf("# warning: this line also hides %s: no frame of this stack names it alone\n",
                  count_of(lines[i].others, "other leaking stack", "other leaking stacks").c_str());
    std::printf("%s\n", printable(lines[i].line).c_str());
  }
}

void print_text(const Model& m, Symbolizer& sym, const SuppressionList& supp, const Evaluation& e, const CheckOptions& o) {
  std::printf("memtide check: %s\n", printable(o.file).c_str());
  if (m.sampling.sampled())
    std::printf("  sampled trace (1 in ~%s allocated, %s): the figures below are estimates\n",
                human_bytes(m.sampling.interval()).c_str(), count_of(m.sampling.samples, "sample", "samples").c_str());
  for (const Limit& l : e.limits) {
    if (!l.set) continue;
    std::printf("  %s %s: %s (limit %s)\n", l.broken() ? paint("FAIL", "1;31").c_str() : paint("ok  ", "32").c_str(),
                l.what.c_str(), l.value(l.actual).c_str(),
                l.value(l.limit).c_str());
  }
  if (!e.leaks_judged)
    std::printf("  leaks: not judged (--max-growth alone: a worker's leak signal is growth)\n");
  else if (e.exec_ended)
    std::printf("  leaks: none counted: the process exec'd another program, whose trace is its own\n");
  else if (e.scanned)
    std::printf("  leaks: blocks unreachable at exit (leak scan); %s in %s still reachable, not counted "
                "(--include-reachable counts them)\n",
                human_bytes(e.reachable_bytes).c_str(), count_of(e.reachable_blocks, "block", "blocks").c_str());
  else if (!m.leak_scan.complete)
    std::printf("  leaks: every block not freed (the trace has no leak scan: record with --leak-scan, or with "
                "memtide run --check, to count only unreachable blocks)\n");
  if (!e.leaks.empty()) {
    std::printf("\n%s leaked in %s from %s (largest first):\n", human_bytes(e.leaked_bytes).c_str(),
                count_of(e.leaked_blocks, "block", "blocks").c_str(), count_of(e.leaks.size(), "stack", "stacks").c_str());
    std::size_t i = 0;
    for (const StackStats* s : e.leaks) {
      if (i == o.top) {
        std::printf("  ... %s (--top to see them)\n", count_of(e.leaks.size() - i, "more stack", "more stacks").c_str());
        break;
      }
      std::string kinds;
      if (e.scanned && s->m.indirect_blocks)
        kinds = s->m.indirect_blocks == s->m.leaked_blocks ? " (indirect)"
                                                           : " (" + human_bytes(s->m.indirect_bytes) + " indirect)";
      std::printf("  %zu. %s in %s%s, allocated %s .. %s\n", ++i, human_bytes(s->m.leaked_bytes).c_str(),
                  count_of(s->m.leaked_blocks, "block", "blocks").c_str(), kinds.c_str(),
                  rel_time(m, s->m.first_leak_time).c_str(), rel_time(m, s->m.last_leak_time).c_str());
      std::fputs(stack_text(sym, s->stack, o.frames, "      ", true).c_str(), stdout);
    }
  }
  if (e.mismatches) {
    std::printf("\n%s (the allocation's stack):\n", count_of(m.anomalies.mismatch_count, "mismatched free", "mismatched frees").c_str());
    std::size_t i = 0;
    for (const Mismatch& x : *e.mismatches) {
      if (i == o.top) break;
      std::printf("  %zu. %s block freed with %s: %s (%s)\n", ++i, std::string(fmt::api_name(x.alloc_api)).c_str(),
                  std::string(fmt::api_name(x.free_api)).c_str(), count_of(x.count, "time", "times").c_str(),
                  human_bytes(x.bytes).c_str());
      std::fputs(stack_text(sym, x.stack, o.frames, "      ", true).c_str(), stdout);
    }
  }
  if (!e.peak_stacks.empty()) {
    const Totals& h = m.heap();
    std::printf("\n%s in %s live at the peak (%s) from %s (largest first):\n", human_bytes(h.peak_bytes).c_str(),
                count_of(h.peak_blocks, "block", "blocks").c_str(), rel_time(m, h.peak_time).c_str(),
                count_of(e.peak_stacks.size(), "stack", "stacks").c_str());
    std::size_t i = 0;
    for (const StackStats* s : e.peak_stacks) {
      if (i == o.top) {
        std::printf("  ... %s (--top to see them)\n", count_of(e.peak_stacks.size() - i, "more stack", "more stacks").c_str());
        break;
      }
      std::printf("  %zu. %s in %s\n", ++i, human_bytes(s->m.peak_bytes).c_str(),
                  count_of(s->m.peak_blocks, "block", "blocks").c_str());
      std::fputs(stack_text(sym, s->stack, o.frames, "      ", true).c_str(), stdout);
    }
  }
  if (e.growth) print_growth(m, *e.growth, sym, o.top, o.frames);
  bool header = false;
  for (const Suppression& x : supp.items()) {
    if (!x.stacks) continue;
    if (!header) {
      std::printf("\nsuppressed: %s in %s\n", human_bytes(e.suppressed_bytes).c_str(),
                  count_of(e.suppressed_blocks, "block", "blocks").c_str());
      header = true;
    }
    std::printf("  leak:%s (%s%s%s): %s, %s, %s\n", x.pattern.c_str(), x.origin.c_str(), x.builtin ? ": " : "",
                x.description.c_str(), count_of(x.stacks, "stack", "stacks").c_str(),
                count_of(x.blocks, "block", "blocks").c_str(), human_bytes(x.bytes).c_str());
  }
  for (const Suppression& x : supp.items())
    if (!x.builtin && !x.stacks) std::printf("  unused: leak:%s (%s)\n", x.pattern.c_str(), x.origin.c_str());
  if (o.gen_suppressions && !e.leaks.empty()) print_suppressions(m, sym, e, o);
  std::printf("\nmemtide check: %s\n", e.failed() ? paint("FAILED", "1;31").c_str() : paint("passed", "32").c_str());
}

// ---------------------------------------------------------------------------------------
// [3] JSON
// ---------------------------------------------------------------------------------------

json check_json(const Model& m, Symbolizer& sym, const SuppressionList& supp, const Evaluation& e, const CheckOptions& o) {
  json j;
  j["file"] = o.file;
  j["result"] = e.failed() ? "fail" : "pass";
  j["complete"] = m.complete;
  j["sampling"] = m.sampling.sampled() ? json{{"interval_bytes", m.sampling.interval()}, {"samples", m.sampling.samples}}
                                       : json(nullptr);
  json limits = json::array();
  for (const Limit& l : e.limits)
    if (l.set) limits.push_back({{"name", l.name}, {"limit", l.limit}, {"actual", l.actual}, {"broken", l.broken()}});
  j["limits"] = limits;
  j["leaked_bytes"] = e.leaked_bytes;
  j["leaked_blocks"] = e.leaked_blocks;
  j["suppressed_bytes"] = e.suppressed_bytes;
  j["suppressed_blocks"] = e.suppressed_blocks;
  j["leak_scan"] = m.leak_scan.complete;
  j["leaks_counted"] = !e.leaks_judged ? "not judged" : e.exec_ended ? "none (exec)" : e.scanned ? "unreachable" : "not freed";
  j["reachable_bytes"] = e.reachable_bytes;
  j["reachable_blocks"] = e.reachable_blocks;
  j["peak_bytes"] = m.heap().peak_bytes;
  j["total_allocations"] = m.heap().allocations;
  json leaks = json::array();
  std::vector<Suggestion> lines;
  if (o.gen_suppressions && !e.leaks.empty()) lines = leak_suggestions(m, sym, e, o.top);
  for (const StackStats* s : e.leaks) {
    if (leaks.size() == o.top) break;
    leaks.push_back({{"bytes", s->m.leaked_bytes},
                     {"count", s->m.leaked_blocks},
                     {"indirect_bytes", e.scanned ? s->m.indirect_bytes : 0},
                     {"indirect_count", e.scanned ? s->m.indirect_blocks : 0},
                     {"stack_id", s->stack.value},
                     {"stack", stack_json(sym, s->stack, o.frames)}});
    if (leaks.size() <= lines.size()) {
      leaks.back()["suppression"] = lines[leaks.size() - 1].line;
      leaks.back()["suppression_also_hides"] = lines[leaks.size() - 1].others;
    }
  }
  j["leaks"] = leaks;
  json peak = json::array();
  for (const StackStats* s : e.peak_stacks) {
    if (peak.size() == o.top) break;
    peak.push_back({{"bytes", s->m.peak_bytes},
                    {"count", s->m.peak_blocks},
                    {"stack_id", s->stack.value},
                    {"stack", stack_json(sym, s->stack, o.frames)}});
  }
  j["peak_stacks"] = peak;
  j["mismatched_frees"] = m.anomalies.mismatch_count;
  json mm = json::array();
  if (e.mismatches)
    for (const Mismatch& x : *e.mismatches) {
      if (mm.size() == o.top) break;
      mm.push_back(mismatch_json(sym, x, o.frames));
    }
  j["mismatches"] = mm;
  j["growth"] = e.growth ? growth_json(m, *e.growth, sym, o.top, o.frames) : json(nullptr);
  j["growth_window"] = e.growth ? growth_window_json(m, *e.growth, o.growth, sym, o.top, o.frames) : json(nullptr);
  json sup = json::array();
  for (const Suppression& x : supp.items())
    if (x.stacks || !x.builtin)
      sup.push_back({{"pattern", "leak:" + x.pattern},
                     {"origin", x.origin},
                     {"builtin", x.builtin},
                     {"stacks", x.stacks},
                     {"blocks", x.blocks},
                     {"bytes", x.bytes}});
  j["suppressions"] = sup;
  j["warnings"] = m.warnings;
  return j;
}

// ---------------------------------------------------------------------------------------
// [4] JUnit
// ---------------------------------------------------------------------------------------

// JUnit readers keep newlines and tabs in failure bodies; other control characters cannot be
// written at all.
std::string junit_escape(std::string_view s) { return xml_escape(s, '?', true); }

// One process's test case: named after its program, failed when a limit is broken (each broken
// limit and the offending stacks in the body), an error when the trace could not be judged.
struct JunitCase {
  std::string name;  // the program's name (made unique in run_check)
  uint64_t pid = 0;
  std::string trace;
  double seconds = 0;
  std::string failure, body;  // failure message and text: a limit is broken
  bool growth = false;        // the broken limit is growth alone (a memtide.growth failure)
  bool leak = false;          // a leak or peak limit is broken
  std::string error;          // the trace could not be judged
};

JunitCase junit_case(const Model& m, Symbolizer& sym, const Evaluation& e, const CheckOptions& o) {
  JunitCase c;
  c.pid = m.process.pid;
  c.trace = o.file;
  c.seconds = static_cast<double>(m.duration()) / 1e9;
  bool leak_stacks = false;
  for (const Limit& l : e.limits) {
    if (!l.broken()) continue;
    c.failure += (c.failure.empty() ? "" : "; ") + l.what + " " + l.value(l.actual) + " > " + l.value(l.limit);
    c.body += l.what + ": " + l.value(l.actual) + " (limit " + l.value(l.limit) + ")\n";
    leak_stacks |= l.name == "max-leaked-bytes" || l.name == "max-leaked-blocks";
    (l.name == "max-growth" ? c.growth : c.leak) = true;
  }
  std::size_t i = 0;
  if (c.growth) {
    for (const StackGrowth& s : e.growth->growing) {
      if (i++ == o.top) break;
      c.body += "\n" + growth_line(s) + "\n" + stack_text(sym, s.stack, o.frames, "  ");
    }
  }
  i = 0;
  if (leak_stacks) {
    for (const StackStats* s : e.leaks) {
      if (i++ == o.top) break;
      c.body += "\n" + human_bytes(s->m.leaked_bytes) + " in " + count_of(s->m.leaked_blocks, "block", "blocks") + "\n" +
                stack_text(sym, s->stack, o.frames, "  ");
    }
  }
  i = 0;
  if (e.mismatches)
    for (const Mismatch& x : *e.mismatches) {
      if (i++ == o.top) break;
      c.body += "\n" + std::string(fmt::api_name(x.alloc_api)) + " block freed with " + std::string(fmt::api_name(x.free_api)) +
                ": " + count_of(x.count, "time", "times") + "\n" + stack_text(sym, x.stack, o.frames, "  ");
    }
  i = 0;
  for (const StackStats* s : e.peak_stacks) {
    if (i++ == o.top) break;
    c.body += "\n" + human_bytes(s->m.peak_bytes) + " in " + count_of(s->m.peak_blocks, "block", "blocks") +
              " live at the peak\n" + stack_text(sym, s->stack, o.frames, "  ");
  }
  return c;
}

// The report: one test suite, one test case per process (several processes of one program told
// apart by their pids).
std::string write_junit(const std::string& path, std::vector<JunitCase> cases, const CheckOptions& o) {
  std::map<std::string, int> uses;
  for (const JunitCase& c : cases) ++uses[c.name];
  std::size_t failures = 0, errors = 0;
  double seconds = 0;
  for (JunitCase& c : cases) {
    if (uses[c.name] > 1) c.name += " (pid " + std::to_string(c.pid) + ")";
    failures += !c.failure.empty();
    errors += !c.error.empty();
    seconds += c.seconds;
  }
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"memtide\" tests=\"" << cases.size() << "\" failures=\"" << failures << "\" errors=\"" << errors
    << "\">\n";
  x << "  <testsuite name=\"memtide check\" tests=\"" << cases.size() << "\" failures=\"" << failures << "\" errors=\""
    << errors << "\" skipped=\"0\" time=\"" << seconds << "\">\n";
  for (const JunitCase& c : cases) {
    x << "    <testcase classname=\"memtide.check\" name=\"" << junit_escape(c.name) << "\" time=\"" << c.seconds << "\">\n";
    if (!c.error.empty())
      x << "      <error type=\"memtide.error\" message=\"" << junit_escape(c.error) << "\"/>\n";
    else if (!c.failure.empty())
      x << "      <failure type=\"" << (c.growth && !c.leak ? "memtide.growth" : "memtide.leak") << "\" message=\"" << junit_escape(c.failure) << "\">" << junit_escape(c.body)
        << "</failure>\n";
    if (!c.trace.empty()) x << "      <system-out>trace: " << junit_escape(c.trace) << "</system-out>\n";
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  std::vector<std::string> inputs = o.suppressions;
  inputs.insert(inputs.end(), o.files.begin(), o.files.end());
  return write_whole_file(path, x.view(), inputs);
}

// ---------------------------------------------------------------------------------------
// [5] Command
// ---------------------------------------------------------------------------------------

// Why the trace does not hold the whole run (empty: it does): its blocks not freed may then have
// been freed after the cut, so no verdict on leaks can be given from it.
std::string incomplete_reason(const Model& m) {
  if (m.truncated) return "the file is cut short (truncated)";
  if (!m.complete || !m.end)
    return "it has no End record (the program was killed, the disk filled up, or it is still running)";
  if (m.end->reason == fmt::EndReason::Detached)
    return "recording stopped at its size limit (--max-size) while the program went on";
  if (m.end->reason == fmt::EndReason::Error) return "recording stopped after an error";
  if (m.end->reason == fmt::EndReason::Detach) return "recording was detached (memtide detach) while the program went on";
  if (m.end->lost_events) return std::to_string(m.end->lost_events) + " events were not recorded";
  return "";
}

// What judging one trace gave: its exit status (0, 1, 2), a label for the summary, and its
// JSON and JUnit parts.
struct Verdict {
  int status = kExitOk;
  bool program_failed = false;  // the process itself did not exit 0 (its trace is kept)
  std::string label;
  json j;
  JunitCase junit;
};

// The program's own suppressions (its __lsan_default_suppressions(), which the recorder read at
// exit), as LeakSanitizer applies them.
void add_program_suppressions(const Model& m, SuppressionList& supp, const std::string& file) {
  if (m.leak_scan.program_suppressions.empty()) return;
  std::string err;
  std::vector<std::string> notes;
  if (!supp.parse(m.leak_scan.program_suppressions, "__lsan_default_suppressions()", err, notes))
    print_warning(file, "the program's suppressions: " + err);
}

Verdict judge(const CheckOptions& o, SuppressionList supp) {
  Verdict v;
  v.label = o.file;
  v.junit.name = std::filesystem::path(o.file).filename().string();
  v.junit.trace = o.file;
  // Every error below is also the test case's.
  auto print_error = [&](std::string_view file, const std::string& message) {
    cli::print_error(file, message);
    v.junit.error = message;
  };
  SymbolPreload preload;
  ReplayOptions ro;
  ro.stack_history = !o.max_growth.empty();
  auto model = load_model(o.file, ro, false, &preload);
  if (!model) {
    v.junit.error = "the trace cannot be read";
    return v.status = kExitError, v;
  }
  if (model->have_process) {
    v.label = program_name(model->process) + " (pid " + std::to_string(model->process.pid) + ")";
    v.junit.name = program_name(model->process);
    v.junit.pid = model->process.pid;
  }
  v.program_failed = !model->end || (fmt::end_has_exit_status(model->end->reason) ? model->end->status != 0
                                                                                  : model->end->reason != fmt::EndReason::Exec);
  if (model->corrupt) {
    print_error(o.file, "the trace is corrupt: leaks cannot be trusted");
    return v.status = kExitError, v;
  }
  add_program_suppressions(*model, supp, o.file);
  // (Before the trace's completeness: a sanitizer's runtime also ends the program by itself,
  // without the End record, when its own leak check fails.)
  if (model->have_process && !model->process.program_malloc.empty()) {
    const std::string& where = model->process.program_malloc;
    const std::string path = where.empty() || where[0] == '/' || model->process.cwd.empty()
                                 ? where
                                 : model->process.cwd + "/" + where;
    print_error(o.file, "the program's allocations were not recorded (it has a malloc of its own, in " + where + ")" +
                            (has_sanitizer_runtime(path)
                                 ? ": a sanitizer's runtime, whose own leak check (LeakSanitizer) judges this build; "
                                   "record a build without the sanitizer for memtide's gate"
                                 : ": leaks cannot be checked"));
    return v.status = kExitError, v;
  }
  if (const std::string why = incomplete_reason(*model); !why.empty() && !judges_leaks(o)) {
    print_warning(o.file, why + ": growth judged on what was recorded");
  } else if (!why.empty()) {
    if (!o.allow_incomplete) {
      print_error(o.file, "cannot judge the trace: " + why +
                              "; a block not freed in it may have been freed later (--allow-incomplete judges what "
                              "was recorded)");
      return v.status = kExitError, v;
    }
    print_warning(o.file, why + ": judged on what was recorded (--allow-incomplete)");
  }
  if (model->sampling.sampled() && judges_leaks(o)) {
    // A leak smaller than the interval is usually not sampled at all: "no leak" cannot be
    // checked on an estimate, only a threshold well above the interval.
    const bool no_leak_limit = o.max_leaked_bytes.empty() && o.max_leaked_blocks.empty();
    const auto bytes = o.max_leaked_bytes.empty() ? std::optional<uint64_t>() : parse_size(o.max_leaked_bytes);
    if (no_leak_limit || (bytes && *bytes == 0) || (!o.max_leaked_blocks.empty() && parse_size(o.max_leaked_blocks) == 0)) {
      print_error(o.file, "the trace is sampled (1 in ~" + human_bytes(model->sampling.interval()) +
                              " allocated): its leak figures are estimates, and a leak smaller than the interval is "
                              "usually not sampled at all, so a limit of 0 cannot be checked; give --max-leaked-bytes "
                              "a threshold well above the interval, or record exactly (without --sample)");
      return v.status = kExitError, v;
    }
  }
  std::optional<Growth> growth;
  if (!o.max_growth.empty()) {
    growth = analyze_growth(*model, o.growth.options());
    if (!growth->ok()) {
      print_error(o.file, "cannot judge growth: " + growth->problem);
      return v.status = kExitError, v;
    }
  }
  Symbolizer sym(*model, {}, &preload);
  const Evaluation e = evaluate(*model, sym, supp, o, std::move(growth));
  if (o.json)
    v.j = check_json(*model, sym, supp, e, o);
  else
    print_text(*model, sym, supp, e, o);
  std::cout.flush();
  print_symbol_problems(o.file, sym);
  if (!o.junit.empty()) {
    JunitCase c = junit_case(*model, sym, e, o);
    c.name = v.junit.name;
    v.junit = std::move(c);
  }
  v.status = e.failed() ? 1 : kExitOk;
  return v;
}

// The files to judge: each FILE, and for a directory (a whole run's) its .mtide files in name
// order. Empty, else what is wrong.
std::string expand_directories(std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const std::string& f : files) {
    std::error_code ec;
    if (!std::filesystem::is_directory(f, ec)) {
      out.push_back(f);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(f, ec))
      if (entry.path().extension() == ".mtide" && entry.is_regular_file(ec)) found.push_back(entry.path().string());
    if (ec) return f + ": " + ec.message();
    if (found.empty()) return f + ": the directory holds no trace (.mtide)";
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  files = std::move(out);
  return "";
}

// Whether --keep-traces=failed removes the trace of this verdict: its process passed and exited 0.
bool removed_after(const CheckOptions& o, const Verdict& v) {
  return o.keep_traces == "failed" && v.status == kExitOk && !v.program_failed;
}

int run_check(CheckOptions o) {
  if (const std::string err = expand_directories(o.files); !err.empty()) {
    std::cerr << "memtide: " << printable(err) << '\n';
    return kExitError;
  }
  SuppressionList supp;
  std::vector<std::string> notes;
  if (std::string err; !load_suppressions(supp, o.suppressions, !o.no_builtin, err, notes)) {
    std::cout.flush();
    std::cerr << "memtide: " << printable(err) << '\n';
    return kExitError;
  }
  for (const std::string& n : notes) std::cerr << "memtide: note: " << printable(n) << '\n';
  if (!o.junit.empty()) {
    std::vector<std::string> inputs = o.suppressions;
    inputs.insert(inputs.end(), o.files.begin(), o.files.end());
    if (const std::string err = check_output_path(o.junit, inputs); !err.empty()) {
      print_error(o.junit, "cannot write the JUnit report: " + err);
      return kExitError;
    }
  }
  if (o.options_only) return kExitOk;

  std::vector<Verdict> verdicts;
  int status = kExitOk;
  for (const std::string& f : o.files) {
    CheckOptions one = o;
    one.file = f;
    if (!verdicts.empty() && !o.json) std::printf("\n");
    verdicts.push_back(judge(one, supp));
    const int st = verdicts.back().status;
    if (st == kExitError || (st == 1 && status == kExitOk)) status = st;
  }
  if (o.json) {
    if (verdicts.size() == 1) {
      if (!verdicts[0].j.is_null()) std::cout << verdicts[0].j.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
    } else {
      json all = json::array();
      for (const Verdict& v : verdicts) all.push_back(v.j);
      const json j = {{"result", status == kExitOk ? "pass" : status == 1 ? "fail" : "error"}, {"traces", all}};
      std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
    }
  } else if (verdicts.size() > 1) {
    // Each trace's verdict was printed above; the processes judged, in one place.
    std::printf("\nmemtide check: %s judged:\n", count_of(verdicts.size(), "process", "processes").c_str());
    for (std::size_t i = 0; i < verdicts.size(); ++i)
      std::printf("  %s %s: %s\n", verdicts[i].status == kExitOk ? "passed" : verdicts[i].status == 1 ? "FAILED" : "ERROR ",
                  printable(verdicts[i].label).c_str(), printable(o.files[i]).c_str());
    std::printf("memtide check: %s\n", status == kExitOk ? "passed" : status == 1 ? "FAILED" : "could not judge every process");
  }
  std::cout.flush();
  if (!o.junit.empty()) {
    std::vector<JunitCase> cases;
    for (const Verdict& v : verdicts) {
      cases.push_back(v.junit);
      if (removed_after(o, v)) cases.back().trace.clear();  // (no name of a file that will be gone)
    }
    if (const std::string err = write_junit(o.junit, std::move(cases), o); !err.empty()) {
      print_error(o.junit, "cannot write the JUnit report: " + err);
      return kExitError;
    }
  }
  // Only the traces worth a look stay: of a process that broke a limit, could not be judged or
  // failed by itself.
  if (o.keep_traces == "failed")
    for (std::size_t i = 0; i < verdicts.size(); ++i)
      if (removed_after(o, verdicts[i])) std::filesystem::remove(o.files[i]);
  return status == 1 ? o.error_exitcode : status;
}


}  // namespace

Command check_command() {
  return {"check", "CI leak gate: exit 1 when leaks or the peak exceed the limits (0: within, 2: error)",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<CheckOptions>();
            const CLI::Validator size_check(
                [](std::string& v) -> std::string {
                  uint64_t bytes = 0;
                  const char* problem = fmt::parse_size(v.c_str(), bytes);
                  return problem ? "not a size: '" + v + "': " + problem : std::string();
                },
                "SIZE");
            sub.add_option("file", o->files,
                           "Trace files (.mtide), or directories of them (a run's): each is judged; the check fails "
                           "when one fails")
                ->required();
            sub.add_option("--max-leaked-bytes", o->max_leaked_bytes, "Most leaked bytes allowed (default 0 when no leak limit is given)")
                ->check(size_check);
            sub.add_option("--max-leaked-blocks", o->max_leaked_blocks, "Most leaked blocks allowed (default: no limit)")
                ->check(size_check);
            sub.add_option("--max-peak-bytes", o->max_peak_bytes, "Highest heap peak allowed (default: no limit)")
                ->check(size_check);
            sub.add_option("--max-mismatched-frees", o->max_mismatched_frees,
                           "Most frees by another family's call allowed (new[] by delete, malloc by delete, new by "
                           "free; default 0 while leaks are judged)")
                ->check(size_check);
            auto* growth = sub.add_option("--max-growth", o->max_growth,
                                          "Most heap growth allowed after the warm-up, e.g. 64KiB/min (the stacks whose "
                                          "live bytes keep growing; alone, leaks are not judged)")
                               ->check(CLI::Validator(
                                   [](std::string& v) -> std::string {
                                     return parse_rate(v) ? std::string()
                                                          : "not a rate: '" + v + "' (a size per s, min or h: 64KiB/min)";
                                   },
                                   "RATE"));
            o->growth.declare(sub)->needs(growth);
            sub.add_option("--suppressions", o->suppressions,
                           "LeakSanitizer-format suppressions file (leak:<glob>, # comments); repeatable")
                ->check(CLI::ExistingFile);
            sub.add_flag("--no-builtin-suppressions", o->no_builtin,
                         "Do not hide the known one-time allocations of glibc and libstdc++");
            add_alloc_fn_option(sub);
            sub.add_flag("--include-reachable", o->include_reachable,
                         "With a leak scan in the trace, count still-reachable blocks as leaks too");
            sub.add_flag("--allow-incomplete", o->allow_incomplete,
                         "Judge a trace cut short (truncated, no End record, recording stopped early) on what it "
                         "holds, instead of exit 2");
            sub.add_option("--junit", o->junit,
                           "Also write a JUnit XML report to this file: one test case per process, named after its "
                           "program");
            sub.add_option("--error-exitcode", o->error_exitcode,
                           "Exit status when a limit is broken (default 1; not 2, the status of an error), to tell a "
                           "leak from a test's own failure")
                ->check(CLI::Range(1, 255) & CLI::Validator(
                                                 [](std::string& v) { return v == "2" ? std::string("2 is the status of an error") : std::string(); },
                                                 "NOT 2"));
            sub.add_flag("--gen-suppressions", o->gen_suppressions,
                         "Print a suppression block for each leaking stack, to paste into a suppressions file");
            sub.add_option("--keep-traces", o->keep_traces,
                           "all (default), or failed: remove the trace of each process that passed and exited 0")
                ->check(CLI::IsMember({"all", "failed"}));
            sub.add_flag("--json", o->json, "Print the result as JSON instead of text");
            sub.add_flag("--options-only", o->options_only,
                         "Check the options (limits, suppressions files, --junit's path) and stop: FILE is the "
                         "trace to come")
                ->group("");  // (memtide run's, before the program starts)
            sub.add_option("--top", o->top, "Leak stacks printed (default 20)")->check(CLI::Range(1, 1000000));
            sub.add_option("--frames", o->frames, "Frames printed per stack (default 24)")->check(CLI::Range(1, 100000));
            // Given twice (MEMTIDE_CHECK_OPTIONS, then the command line): the last one counts.
            for (CLI::Option* opt : sub.get_options())
              if (opt->get_items_expected_max() == 1) opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
            return [o] { return run_check(*o); };
          }};
}

}  // namespace memtide::cli
