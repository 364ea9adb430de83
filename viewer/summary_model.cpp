#include "viewer/summary_model.h"

#include <algorithm>
#include <cstring>

#include "analysis/attached.h"
#include "viewer/format.h"

namespace memtide::viewer {

using analysis::Domain;
using analysis::Model;
using analysis::Totals;

namespace {

std::string rel(const Model& m, uint64_t t) { return format_duration(t > m.time_base ? t - m.time_base : 0); }

std::string signal_name(uint64_t sig) {
  const char* s = sig < 65 ? sigabbrev_np(static_cast<int>(sig)) : nullptr;
  return s ? "SIG" + std::string(s) : "signal " + std::to_string(sig);
}

}  // namespace

std::string end_description(const Model& m, bool recording) {
  if (!m.end && recording) return "still recording (the recorder holds the file)";
  if (!m.end) return m.truncated ? "no end record (still being written, or cut)" : "no end record (killed?)";
  const auto& e = *m.end;
  switch (e.reason) {
    case fmt::EndReason::Exit:
    case fmt::EndReason::ImmediateExit:
    case fmt::EndReason::QuickExit:  // "exit status 0", "_exit status 3": the reason's name (records.h)
      return std::string(fmt::end_reason_name(e.reason)) + " status " + std::to_string(e.status);
    case fmt::EndReason::Signal: return "killed by " + signal_name(e.status);
    case fmt::EndReason::Exec: return "exec'd another program";
    case fmt::EndReason::Error: return "recording stopped after an error";
    case fmt::EndReason::Detached: return "recording stopped at the trace's size limit";
    case fmt::EndReason::Detach: return "detached (memtide detach): the program went on";
    default: return "unknown end";
  }
}

SummaryData make_summary(const Model& m, const std::string& path, bool recording) {
  SummaryData d;
  const auto& p = m.process;
  const std::string exe = p.exe.empty() ? path : p.exe;
  const auto slash = exe.rfind('/');
  const std::string name = analysis::program_name(p);
  d.title = (name.empty() ? (slash == std::string::npos ? exe : exe.substr(slash + 1)) : name) +
            (m.have_process ? " (pid " + std::to_string(p.pid) + ")" : "");

  SummarySection proc{"Process", {}};
  std::string cmd;
  for (const std::string& a : p.argv) cmd += (cmd.empty() ? "" : " ") + a;
  proc.rows.push_back({"command", cmd.empty() ? exe : cmd});
  if (!p.exe.empty()) proc.rows.push_back({"executable", p.exe});
  if (m.have_process) {
    proc.rows.push_back({"pid", std::to_string(p.pid) + " (parent " + std::to_string(p.ppid) + ")"});
    if (!p.cwd.empty()) proc.rows.push_back({"directory", p.cwd});
    proc.rows.push_back({"mode", p.mode == fmt::RecordingMode::Sampled
                                     ? "sampled, one sample per " + format_bytes(p.sample_interval) + " on average"
                                     : "exact (every allocation)"});
  }
  const analysis::SamplingInfo& smp = m.sampling;
  if (smp.sampled()) {
    d.sampling_badge = "sampled, 1 in ~" + format_bytes(smp.interval());
    d.sampling_note = "Sampled trace: about one allocation per " + format_bytes(smp.interval()) +
                      " allocated was recorded (" + format_count(smp.samples) +
                      " samples); every heap figure is an estimate (~), each sample standing for the bytes and blocks it represents.";
    std::string switches;
    for (const analysis::SamplingInfo::Change& c : smp.changes)
      switches += (switches.empty() ? "" : ", ") + (c.interval ? "1 in ~" + format_bytes(c.interval) : std::string("exact")) +
                  " from " + rel(m, c.time);
    proc.rows.push_back({"sampling", switches});
  }
  const std::string est = smp.sampled() ? "~" : "";
  proc.rows.push_back({"duration", format_duration(m.duration())});
  proc.rows.push_back({recording && !m.end ? "state" : "ended", end_description(m, recording), !m.complete && !recording});
  proc.rows.push_back({"threads", format_count(m.threads.size())});
  proc.rows.push_back({"trace", path + " (" + format_bytes(m.file_size) + ", " + format_count(m.events) + " events)"});
  d.sections.push_back(std::move(proc));

  const Totals& h = m.heap();
  SummarySection heap{"Heap", {}};
  if (m.has_window()) {
    const uint64_t to = m.window_to == UINT64_MAX ? m.last_time : m.window_to;
    heap.rows.push_back({"window", "allocations made " + rel(m, m.window_from) + " .. " + rel(m, to)});
  }
  heap.rows.push_back({"allocations", est + format_count(h.allocations) + " (" + est + format_bytes(h.allocated_bytes) + ")"});
  heap.rows.push_back({"frees", est + format_count(h.frees) + " (" + est + format_bytes(h.freed_bytes) + ")"});
  if (smp.sampled())
    heap.rows.push_back({"temporary", "not known in a sampled trace"});
  else
    heap.rows.push_back({"temporary", format_count(h.temporaries) + " (" + format_share(h.temporaries, h.allocations) +
                                          " of allocations)"});
  heap.rows.push_back({"peak heap", est + format_bytes(h.peak_bytes) + " in " + est + format_count(h.peak_blocks) +
                                        (h.peak_blocks == 1 ? " block at " : " blocks at ") + rel(m, h.peak_time)});
  heap.rows.push_back({"peak RSS", m.peak_rss ? format_bytes(m.peak_rss) : "not recorded"});
  heap.rows.push_back({"not freed", est + format_bytes(h.leaked_bytes) + " in " + est + format_count(h.leaked_blocks) + (h.leaked_blocks == 1 ? " block" : " blocks"),
                       h.leaked_bytes > 0});
  d.sections.push_back(std::move(heap));

  for (Domain dom : {Domain::Mmap, Domain::Custom}) {
    const Totals& t = m.totals[static_cast<unsigned>(dom)];
    if (t.allocations == 0 && t.frees == 0) continue;
    SummarySection s{dom == Domain::Mmap ? "Anonymous mappings (mmap)" : "Custom pools", {}};
    s.rows.push_back({"allocations", format_count(t.allocations) + " (" + format_bytes(t.allocated_bytes) + ")"});
    s.rows.push_back({"peak", format_bytes(t.peak_bytes) + " at " + rel(m, t.peak_time)});
    s.rows.push_back({"not freed", format_bytes(t.leaked_bytes) + " in " + format_count(t.leaked_blocks) + (t.leaked_blocks == 1 ? " block" : " blocks")});
    d.sections.push_back(std::move(s));
  }

  SummarySection apis{"Allocations by API", {}};
  for (unsigned i = 0; i < fmt::kApiCount; ++i) {
    const auto& a = m.alloc_api[i];
    const auto& f = m.free_api[i];
    if (a.calls)
      apis.rows.push_back({std::string(fmt::api_name(static_cast<fmt::Api>(i))),
                           est + format_count(a.calls) + " calls, " + est + format_bytes(a.bytes)});
    else if (f.calls)
      apis.rows.push_back({std::string(fmt::api_name(static_cast<fmt::Api>(i))),
                           est + format_count(f.calls) + " calls, " + est + format_bytes(f.bytes) + " released"});
  }
  if (!apis.rows.empty()) d.sections.push_back(std::move(apis));

  if (!d.sampling_note.empty()) d.warnings.push_back(d.sampling_note);
  if (std::string note = analysis::unrecorded_allocations_note(p); !note.empty()) d.warnings.push_back(std::move(note));
  if (std::string note = analysis::attached_note(m); !note.empty()) d.warnings.push_back(std::move(note));
  for (const std::string& w : m.warnings) d.warnings.push_back(w);
  const auto& an = m.anomalies;
  uint64_t unknown = 0;
  for (uint64_t c : an.unknown_free_count) unknown += c;
  if (unknown) d.warnings.push_back(format_count(unknown) + " frees of addresses that were not live (allocated before "
                                                            "recording, or freed twice)");
  if (an.mismatch_count)
    d.warnings.push_back(format_count(an.mismatch_count) + (an.mismatch_count == 1 ? " block" : " blocks") + " released by the wrong API (e.g. new[] with free)");
  if (an.bad_records) d.warnings.push_back(format_count(an.bad_records) + " records that could not be right were skipped");
  if (m.end && m.end->lost_events)
    d.warnings.push_back(format_count(m.end->lost_events) + " events were lost by the recorder");
  if (m.markers_dropped) d.warnings.push_back(format_count(m.markers_dropped) + " markers were not kept (too many)");
  return d;
}

}  // namespace memtide::viewer
