// `memtide info FILE [--json]`: what a trace file holds and whether it is whole.
// `memtide info FILE --end [--json]`: only how the recorded process ended, from the end of the
// file (the End record is in the last blocks, before any appended symbols), without reading
// the rest: `memtide run` asks it to tell a signal's status from an exit status.
//
// Reads every block (no merge needed: counts and extremes do not depend on order), then
// prints the summary on stdout. A truncated file gets the summary of what could be read and a
// warning (exit 0, as every reader treats it); a corrupt one the summary, one error line on
// stderr and exit status 2. A file whose recorder still holds its lock is "growing", not
// truncated.
//
// Sections: [1] collecting  [2] state of the file  [3] text output  [4] JSON output  [5] command
#include <CLI/CLI.hpp>

#include <array>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "analysis/format.h"
#include "cli/common.h"
#include "formats/checkpoint.h"
#include "formats/decoder.h"
#include "formats/reader.h"

namespace memtide::cli {
namespace {

using namespace memtide::fmt;

// ---------------------------------------------------------------------------------------
// [1] Collecting
// ---------------------------------------------------------------------------------------

struct ProcessSummary {
  ProcessInfo info;  // string views reset; the copies below hold the text
  std::string exe, cwd;
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> options;
};

struct InfoCollector : NullVisitor {
  std::array<uint64_t, kRecordTypeCount> counts{};
  std::map<uint8_t, uint64_t> unknown;  // tag -> count
  std::optional<ProcessSummary> process;
  std::optional<End> end;
  uint64_t first_time = UINT64_MAX, last_time = 0;
  uint64_t blocks = 0;
  std::set<uint32_t> streams;
  std::set<uint64_t> threads;

  void count(RecordType t) { ++counts[static_cast<unsigned>(t)]; }
  void timed(RecordType t, uint64_t time) {
    count(t);
    first_time = std::min(first_time, time);
    last_time = std::max(last_time, time);
  }

  void on_block(const Block& b) {
    ++blocks;
    streams.insert(b.header.stream);
  }
  void on_process_info(uint32_t, const ProcessInfo& x) {
    count(RecordType::ProcessInfo);
    if (process) return;  // the first one describes the process
    ProcessSummary& p = process.emplace();
    p.info = x;
    p.info.exe = p.info.cwd = p.info.options = {};
    p.info.argv_data = p.info.argv_end = nullptr;
    p.exe = x.exe;
    p.cwd = x.cwd;
    ArgvIterator it(x);
    for (std::string_view a; it.next(a);) p.argv.emplace_back(a);
    OptionIterator opts(x);
    for (std::string_view name, value; opts.next(name, value);) p.options.emplace_back(name, value);
  }
  void on_module_load(uint32_t, const ModuleLoad& x) { timed(RecordType::ModuleLoad, x.time); }
  void on_module_unload(uint32_t, const ModuleUnload& x) { timed(RecordType::ModuleUnload, x.time); }
  void on_thread_start(uint32_t, const ThreadStart& x) {
    timed(RecordType::ThreadStart, x.time);
    threads.insert(x.thread);
  }
  void on_thread_name(uint32_t, const ThreadName& x) { timed(RecordType::ThreadName, x.time); }
  void on_thread_exit(uint32_t, const ThreadExit& x) { timed(RecordType::ThreadExit, x.time); }
  void on_stack_def(uint32_t, const StackDef&) { count(RecordType::StackDef); }
  void on_counters(uint32_t, const Counters& x) { timed(RecordType::Counters, x.time); }
  void on_marker(uint32_t, const Marker& x) { timed(RecordType::Marker, x.time); }
  void on_sample_weight(uint32_t, const SampleWeight&) { count(RecordType::SampleWeight); }
  void on_watermark(uint32_t, const Watermark& x) { timed(RecordType::Watermark, x.time); }
  void on_end(uint32_t, const End& x) {
    timed(RecordType::End, x.time);
    end = x;
  }
  void on_symbols(uint32_t, const Symbols&) { count(RecordType::Symbols); }
  void on_scan(uint32_t, const Scan&) { count(RecordType::Scan); }
  void on_alloc(uint32_t, const Alloc& x) { timed(RecordType::Alloc, x.time); }
  void on_free(uint32_t, const Free& x) { timed(RecordType::Free, x.time); }
  void on_unknown(uint32_t, uint8_t tag, std::span<const uint8_t> payload) {
    if (tag != kTagCheckpoint) {
      ++unknown[tag];
      return;
    }
    ++checkpoint_records;  // (2.2) a checkpoint's head, or its live blocks
    CheckpointHead h;
    if (!payload.empty() && payload[0] == static_cast<uint8_t>(CheckpointOp::Head) &&
        parse_checkpoint(payload, 0, h, [](CheckpointDomain, const CheckpointEntry&) {}))
      checkpoints.push_back(h);
  }
  uint64_t checkpoint_records = 0;
  std::vector<CheckpointHead> checkpoints;

  uint64_t n(RecordType t) const { return counts[static_cast<unsigned>(t)]; }
  uint64_t events() const { return n(RecordType::Alloc) + n(RecordType::Free); }
};

// ---------------------------------------------------------------------------------------
// [2] State of the file
// ---------------------------------------------------------------------------------------

enum class State { Complete, Incomplete, Growing, Truncated, Corrupt, Unreadable };

std::string_view state_name(State s) {
  switch (s) {
    case State::Complete: return "complete";
    case State::Incomplete: return "incomplete";
    case State::Growing: return "growing";
    case State::Truncated: return "truncated";
    case State::Corrupt: return "corrupt";
    case State::Unreadable: return "unreadable";
  }
  return "?";
}


std::string mode_name(RecordingMode m) {
  switch (m) {
    case RecordingMode::Exact: return "exact";
    case RecordingMode::Sampled: return "sampled";
    case RecordingMode::Count: break;
  }
  return "unknown(" + std::to_string(static_cast<unsigned>(m)) + ")";
}

struct Summary {
  std::string file;
  uint64_t size = 0;
  FileInfo header;
  const InfoCollector* c = nullptr;
  State state = State::Complete;
  ReadResult stop;  // what ended the reading
  std::string segments;  // a segment set: the range it holds (describe_set)
};

std::string tag_hex(uint8_t tag) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", tag);
  return buf;
}

std::string state_line(const Summary& s) {
  const InfoCollector& c = *s.c;
  switch (s.state) {
    case State::Complete: {
      std::string line = "complete (end: " + std::string(end_reason_name(c.end->reason));
      if (c.end->reason == EndReason::Signal)
        line += ", signal " + std::to_string(c.end->status);
      else if (end_has_exit_status(c.end->reason))
        line += ", status " + std::to_string(c.end->status);
      return line + ")";
    }
    case State::Incomplete: return "incomplete (no end record: the process was killed or the recorder stopped early)";
    case State::Growing: return "still growing (the recorder is writing the file)";
    case State::Truncated: return "truncated at offset " + std::to_string(s.stop.offset);
    case State::Corrupt: return "corrupt at offset " + std::to_string(s.stop.offset);
    case State::Unreadable: return "read error at offset " + std::to_string(s.stop.offset);
  }
  return "?";
}

// ---------------------------------------------------------------------------------------
// [3] Text output
// ---------------------------------------------------------------------------------------

void print_text(const Summary& s) {
  const InfoCollector& c = *s.c;
  auto row = [](std::string_view label, const std::string& value) {
    std::printf("%-12s %s\n", std::string(label).c_str(), value.c_str());
  };
  row("file", printable(s.file) + " (" + std::to_string(s.size) + " bytes)");
  if (!s.segments.empty()) row("kept", s.segments);
  row("format", std::to_string(s.header.version_major) + "." + std::to_string(s.header.version_minor));
  if (c.process) {
    const ProcessSummary& p = *c.process;
    row("process", "pid " + std::to_string(p.info.pid) + ", ppid " + std::to_string(p.info.ppid));
    row("executable", printable(p.exe));
    std::string cmd;
    for (const auto& a : p.argv) cmd += (cmd.empty() ? "" : " ") + shell_quote(a);
    row("command", cmd);
    row("cwd", printable(p.cwd));
    row("started", iso_time_utc(p.info.realtime_start_ns));
    row("page size", std::to_string(p.info.page_size));
    std::string mode = mode_name(p.info.mode);
    if (p.info.mode == RecordingMode::Sampled)
      mode += " (one sample per " + std::to_string(p.info.sample_interval) + " bytes)";
    row("mode", mode);
    row("max depth", std::to_string(p.info.max_depth));
    std::string opts;
    for (const auto& [k, v] : p.options) opts += (opts.empty() ? "" : " ") + printable(k) + "=" + shell_quote(v);
    row("options", opts.empty() ? "(defaults)" : opts);
  } else {
    row("process", "(no process record)");
  }
  row("duration", c.first_time <= c.last_time ? format_duration(c.last_time - c.first_time) : "-");
  row("blocks", std::to_string(c.blocks) + " in " + std::to_string(c.streams.size()) + " streams");
  row("threads", std::to_string(c.threads.size()) + " started");
  std::printf("records\n");
  for (unsigned t = 0; t < kRecordTypeCount; ++t)
    if (c.counts[t]) std::printf("  %-14s %12llu\n", std::string(record_type_name(static_cast<RecordType>(t))).c_str(),
                                 static_cast<unsigned long long>(c.counts[t]));
  for (const auto& [tag, n] : c.unknown)
    std::printf("  %-14s %12llu\n", ("unknown " + tag_hex(tag)).c_str(), static_cast<unsigned long long>(n));
  char bpe[64] = "-";
  if (c.events()) std::snprintf(bpe, sizeof bpe, "%.2f bytes/event", static_cast<double>(s.size) / static_cast<double>(c.events()));
  row("events", std::to_string(c.events()) + " alloc+free, " + bpe);
  if (!c.checkpoints.empty()) {
    const uint64_t base = c.process ? c.process->info.monotonic_start_ns : 0;
    const CheckpointHead &a = c.checkpoints.front(), &b = c.checkpoints.back();
    auto at = [base](uint64_t t) { return format_duration(t >= base ? t - base : 0); };
    // (A kept set's first ones may be gone: the last one's number says how many were written.)
    const std::string written = b.seq > c.checkpoints.size() ? " (of " + std::to_string(b.seq) + " written)" : "";
    row("checkpoints", std::to_string(c.checkpoints.size()) + written + ", at " + at(a.time) + " to " + at(b.time) + "; the last: " +
                           std::to_string(b.blocks[0]) + " live heap blocks (" + memtide::analysis::format_bytes(b.bytes[0], memtide::analysis::BytesStyle::Text) + ")");
  }
  if (c.end && c.end->lost_events) row("lost events", std::to_string(c.end->lost_events));
  row("state", state_line(s));
}

// ---------------------------------------------------------------------------------------
// [4] JSON output
// ---------------------------------------------------------------------------------------

void print_json(const Summary& s) {
  using nlohmann::json;
  const InfoCollector& c = *s.c;
  json j;
  j["file"] = s.file;
  j["size_bytes"] = s.size;
  if (!s.segments.empty()) j["kept"] = s.segments;
  j["format"] = {{"major", s.header.version_major}, {"minor", s.header.version_minor}, {"flags", s.header.flags}};
  if (c.process) {
    const ProcessSummary& p = *c.process;
    json opts = json::object();
    for (const auto& [k, v] : p.options) opts[k] = v;
    j["process"] = {{"pid", p.info.pid},
                    {"ppid", p.info.ppid},
                    {"exe", p.exe},
                    {"cwd", p.cwd},
                    {"argv", p.argv},
                    {"start_time", iso_time_utc(p.info.realtime_start_ns)},
                    {"realtime_start_ns", p.info.realtime_start_ns},
                    {"monotonic_start_ns", p.info.monotonic_start_ns},
                    {"page_size", p.info.page_size},
                    {"mode", mode_name(p.info.mode)},
                    {"sample_interval", p.info.sample_interval},
                    {"max_depth", p.info.max_depth},
                    {"counter_interval_ns", p.info.counter_interval_ns},
                    {"options", opts}};
  } else {
    j["process"] = nullptr;
  }
  json records = json::object();
  for (unsigned t = 0; t < kRecordTypeCount; ++t) records[std::string(record_type_name(static_cast<RecordType>(t)))] = c.counts[t];
  j["records"] = records;
  json unknown = json::object();
  for (const auto& [tag, n] : c.unknown) unknown[tag_hex(tag)] = n;
  j["unknown_records"] = unknown;
  j["blocks"] = c.blocks;
  j["streams"] = c.streams.size();
  j["threads_started"] = c.threads.size();
  if (c.first_time <= c.last_time) {
    j["first_time_ns"] = c.first_time;
    j["last_time_ns"] = c.last_time;
    j["duration_ns"] = c.last_time - c.first_time;
  } else {
    j["first_time_ns"] = j["last_time_ns"] = j["duration_ns"] = nullptr;
  }
  j["events"] = c.events();
  json cps = json::array();
  const uint64_t base = c.process ? c.process->info.monotonic_start_ns : 0;
  for (const CheckpointHead& h : c.checkpoints)
    cps.push_back({{"seq", h.seq}, {"time_ns", h.time >= base ? h.time - base : 0}, {"replay_from", h.replay_from},
                   {"heap_bytes", h.bytes[0]}, {"heap_blocks", h.blocks[0]}, {"mmap_bytes", h.bytes[2]}});
  j["checkpoints"] = cps;
  j["bytes_per_event"] = c.events() ? json(static_cast<double>(s.size) / static_cast<double>(c.events())) : json(nullptr);
  if (c.end)
    j["end"] = {{"reason", end_reason_name(c.end->reason)},
                {"status", c.end->status},
                {"allocations", c.end->allocations},
                {"frees", c.end->frees},
                {"lost_events", c.end->lost_events}};
  else
    j["end"] = nullptr;
  j["state"] = state_name(s.state);
  if (s.state == State::Truncated || s.state == State::Corrupt || s.state == State::Unreadable)
    j["error"] = {{"offset", s.stop.offset}, {"message", s.stop.message}};
  else
    j["error"] = nullptr;
  std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
}

// ---------------------------------------------------------------------------------------
// [5] The command
// ---------------------------------------------------------------------------------------

struct InfoOptions {
  std::string file;
  bool json = false;
  bool end = false;
};

struct EndFinder : NullVisitor {
  std::optional<End> end;
  void on_end(uint32_t, const End& x) { end = x; }
};

// The End record, looked for in the last kTail bytes first (from the first block header found
// there), then, if it is not there, in the whole file.
int run_end(const InfoOptions& o, FileReader& reader) {
  constexpr uint64_t kTail = uint64_t{8} << 20;
  const uint64_t first = reader.offset(), size = reader.size();
  EndFinder f;
  RecordDecoder decoder;
  ReadResult stop;
  if (size > first + kTail) {
    reader.seek(size - kTail - 1);
    if (reader.resync()) stop = read_records(reader, decoder, f);
  }
  if (!f.end) {
    reader.seek(first);
    stop = read_records(reader, decoder, f);
  }
  if (o.json) {
    nlohmann::json j;
    if (f.end)
      j = {{"reason", end_reason_name(f.end->reason)}, {"status", f.end->status}};
    else
      j = {{"reason", nullptr}, {"status", nullptr}};
    std::cout << j.dump(2) << '\n';
  } else if (f.end) {
    std::cout << end_reason_name(f.end->reason) << ' ' << f.end->status << '\n';
  } else {
    std::cout << "none\n";
  }
  if (!f.end && !stop.end_of_file() && stop.status != ReadStatus::Truncated && stop.status != ReadStatus::Corrupt) {
    print_error(o.file, stop.message);
    return kExitError;
  }
  return kExitOk;
}

int run_info(const InfoOptions& o) {
  FileReader reader;
  const OpenResult open = reader.open(o.file);
  if (!open.ok()) {
    // A recorder that has just created its file may not have written the header yet.
    if ((open.error == OpenError::Empty || open.error == OpenError::TruncatedHeader) && is_being_written(o.file)) {
      std::cout << printable(o.file) << ": still growing (the recorder has not written the file header yet)\n";
      return kExitOk;
    }
    print_error(o.file, open.message);
    return kExitError;
  }
  for (const auto& w : reader.warnings()) print_warning(o.file, w);
  if (o.end) return run_end(o, reader);

  InfoCollector c;
  RecordDecoder decoder;
  Summary s;
  s.file = o.file;
  s.header = reader.info();
  s.c = &c;
  // (read_records, with a progress bar: a large trace takes seconds)
  ProgressBar progress;
  const uint64_t total = reader.size();
  for (Block b;;) {
    s.stop = reader.next(b);
    if (s.stop.ok()) s.stop = decoder.decode(b, c);
    if (!s.stop.ok()) break;
    progress(reader.offset(), total);
  }
  progress(total, total);
  s.size = reader.size();
  if (reader.segment_set())
    s.segments = describe_set(o.file, c.process ? c.process->info.monotonic_start_ns : 0, c.last_time, &s.size);
  const bool alive = reader.writer_alive();
  switch (s.stop.status) {
    case ReadStatus::EndOfFile:
      s.state = c.end ? State::Complete : alive ? State::Growing : State::Incomplete;
      break;
    case ReadStatus::Truncated: s.state = alive ? State::Growing : State::Truncated; break;
    case ReadStatus::Corrupt: s.state = State::Corrupt; break;
    default: s.state = State::Unreadable; break;
  }

  if (o.json)
    print_json(s);
  else
    print_text(s);

  for (const auto& [tag, n] : c.unknown)
    print_warning(o.file, "skipped " + std::to_string(n) + " record(s) with unknown tag " + tag_hex(tag) +
                              " (written by a newer memtide?)");
  if (s.state == State::Incomplete) print_warning(o.file, "no end record: the trace stops without a proper end");
  // A trace cut short is described up to the cut, as every reader reads it (README, "A trace
  // cut short"); only `check`, which must give a verdict, refuses it.
  if (s.state == State::Truncated) {
    print_warning(o.file, s.stop.message);
    return kExitOk;
  }
  if (s.state == State::Corrupt || s.state == State::Unreadable) {
    print_error(o.file, s.stop.message);
    return kExitError;
  }
  return kExitOk;
}

}  // namespace

Command info_command() {
  return {"info", "Summarise a trace file: process, record counts, duration, whether it is complete",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<InfoOptions>();
            sub.add_option("file", o->file, "Trace file (.mtide)")->required();
            sub.add_flag("--json", o->json, "Print the summary as JSON");
            sub.add_flag("--end", o->end,
                         "Print only how the recorded process ended (reason and status, or none), read from the end of "
                         "the file");
            return [o] { return run_info(*o); };
          }};
}

}  // namespace memtide::cli
