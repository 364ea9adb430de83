// `memtide symbolize FILE [-o OUT]`: resolves every return address of the trace's stacks with
// the modules on this machine and appends the names as Symbols records (formats/records.h
// [4]), so that a copy of the trace read elsewhere (a CI artifact) still shows functions,
// files, lines and inlined frames. `report`, `check` and `flamegraph` prefer these names and
// do not open the modules' files for them.
//
// In place, the file must end at a block boundary and no recorder may still be writing it;
// with -o the readable part of FILE is copied to OUT first and the symbols go there (this also
// works for a truncated trace). Modules whose file is missing or changed (build-id) are
// reported and left out; modules already symbolised are skipped unless --force. An address
// that the module's file cannot name (no symbol, no debug information) is stored with empty
// names, so that readers need not look again.
//
// Only the stacks and modules are read (analysis/definitions.h), not the events. With
// --follow (how `memtide run` calls it) the trace is read while the recorder writes it: the
// modules' files are opened and new addresses resolved as they appear, and the symbols are
// appended once the recorder has let go of the file. --manifest names the traces by a
// `memtide run` manifest instead, following them all side by side as their lines appear
// (run_symbolize); `memtide run` creates MANIFEST.ended when the program has ended, after
// which the follower waits at most 2 s more for each file to be let go of (a child process
// may have inherited it). A follower whose `memtide run` was killed follows the traces until
// none is being written, then removes the manifest itself. It also sends SIGUSR1 then, which cuts the follower's current pause
// short, so that the names are appended as soon as the recorder has let go rather than at the
// next poll.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <unordered_set>
#include <utility>
#include <vector>

#include "analysis/definitions.h"
#include "cli/analysis_cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/run_summary.h"
#include "cli/symbol_cache.h"
#include "formats/reader.h"
#include "formats/segment_set.h"
#include "formats/writer.h"

namespace memtide::cli {
namespace {

using namespace memtide::analysis;

struct SymbolizeOptions {
  std::string file, out, manifest;
  std::string summary;  // with --manifest: where the run's summary lines go (run_summary.h)
  bool force = false;
  bool follow = false;
  bool quiet = false;
  double poll_ms = 10;  // a short program's trace is complete this long after it ends, at most
};

// Whether `memtide run` has said that the program ended (MANIFEST.ended exists).
bool program_ended(const SymbolizeOptions& o) {
  struct stat st;
  return !o.manifest.empty() && ::stat((o.manifest + ".ended").c_str(), &st) == 0;
}

// Set by SIGUSR1 (`memtide run`: the program has ended): the next pause is skipped.
volatile sig_atomic_t g_woken = 0;
void on_wake(int) { g_woken = 1; }

// With --manifest, SIGUSR1 wakes the follower (memtide run starts it with the signal ignored,
// so one sent before this point is not fatal).
void catch_wake() {
  struct sigaction sa {};
  sa.sa_handler = on_wake;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: the signal ends a pause in nanosleep
  sigaction(SIGUSR1, &sa, nullptr);
}

// A pause of `ms`, cut short by SIGUSR1 (not resumed after it, unlike sleep_for).
void sleep_ms(double ms) {
  if (g_woken) {
    g_woken = 0;
    return;
  }
  const auto ns = static_cast<long long>(ms * 1e6);
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  if (::nanosleep(&ts, nullptr) != 0) g_woken = 0;
}

// The pause between polls of a follower. While no poll finds a new address (a program in its
// steady state, or idle) it doubles, up to kIdlePauseMs: a poll costs CPU even when there is
// nothing to resolve (bench/README.md, "Other measurements"). A new address brings it back to poll_ms. With a manifest, the end of the
// program does not wait for it (SIGUSR1 cuts the pause short); following one trace, the end is
// seen at most kIdlePauseMs late.
class PollPause {
 public:
  explicit PollPause(double poll_ms) : poll_ms_(poll_ms), pause_(poll_ms) {}
  // The next pause, after a poll that found new work (`busy`) or none.
  double next(bool busy) {
    pause_ = busy ? poll_ms_ : std::min(pause_ * 2, std::max(poll_ms_, kIdlePauseMs));
    return pause_;
  }

 private:
  static constexpr double kIdlePauseMs = 160;
  double poll_ms_, pause_;
};

// Resolves the return addresses of the stacks read so far that it has not seen yet: while
// following, the work is done as the program runs. A thread's block may come before the
// process stream's block that loads the module its stacks run in: such addresses wait for the
// next call, and count as outside every module only at the end.
struct Resolver {
  DefinitionReader& defs;
  Symbolizer& sym;
  SymbolCache& cache;
  std::unordered_set<uint64_t> seen;
  std::vector<uint64_t> waiting;  // in no module read so far
  uint64_t outside = 0;

  // Calls f(function, file, line) for each frame that names offset `off` of `m` (none when
  // nothing does), from the cache, else from the module's file (then kept in the cache if the
  // module has debug information). False when the file cannot be used. The views stay valid
  // while the cache and the symbolizer do: nothing is copied per address.
  template <class F>
  bool each_name(const ModuleInfo& m, uint64_t off, bool* cached, F&& f) {
    if (const CachedFrames* c = cache.find(m, off, cached)) {
      for (const CachedFrame& x : *c) f(std::string_view(x.function), std::string_view(x.file), x.line);
      return true;
    }
    const ModuleState st = sym.file_state(m);
    if (st != ModuleState::Ok && st != ModuleState::NoDebugInfo) return false;
    const std::vector<Frame> frames = sym.resolve_in_file(m, off);
    const bool none = frames.empty() || (frames.size() == 1 && frames[0].function.empty() && frames[0].file.empty());
    if (st == ModuleState::Ok) {
      CachedFrames out;
      if (!none)
        for (const Frame& x : frames) out.push_back({std::string(x.function), std::string(x.file), x.line});
      cache.put(m, off, std::move(out));
    }
    if (!none)
      for (const Frame& x : frames) f(x.function, x.file, uint64_t{x.line});  // interned by the symbolizer
    return true;
  }

  // Resolves the addresses the stacks read since the last call brought; returns how many were new.
  std::size_t catch_up(bool last = false) {
    const Model& model = defs.model();
    std::vector<uint64_t> ips = std::exchange(waiting, {});
    const std::size_t retried = ips.size();  // still in no module: not new
    for (uint64_t ip : defs.take_new_ips())
      if (seen.insert(ip).second) ips.push_back(ip);
    for (uint64_t ip : ips) {
      const ModuleInfo* m = model.module_at(ip);
      if (!m) {
        if (last) ++outside;
        else waiting.push_back(ip);
        continue;
      }
      (void)each_name(*m, ip - m->load_bias, nullptr, [](std::string_view, std::string_view, uint64_t) {});
    }
    return ips.size() - retried;
  }
};

// Offset of the end of the last whole block (what a copy keeps).
bool readable_end(const std::string& path, uint64_t& end, bool& whole, std::string& err) {
  fmt::FileReader r;
  if (auto o = r.open(path); !o.ok()) {
    err = o.message;
    return false;
  }
  fmt::BlockRef b;
  fmt::ReadResult res;
  while ((res = r.skip(b)).ok()) {
  }
  end = r.offset();
  whole = res.end_of_file();
  if (!whole && res.status != fmt::ReadStatus::Truncated) {
    err = res.message;
    return false;
  }
  return true;
}

// The first `n` bytes of `from`, written to `out`.
bool copy_prefix(const std::string& from, int out, uint64_t n, std::string& err) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    err = from + ": " + std::strerror(errno);
    return false;
  }
  std::vector<char> buf(1 << 20);
  bool ok = true;
  while (n > 0 && ok) {
    const ssize_t got = ::read(in, buf.data(), std::min<uint64_t>(n, buf.size()));
    if (got <= 0) {
      ok = false;
      err = from + ": read error";
      break;
    }
    for (ssize_t done = 0; done < got;) {
      const ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(got - done));
      if (w < 0) {
        ok = false;
        err = std::strerror(errno);
        break;
      }
      done += w;
    }
    n -= static_cast<uint64_t>(got);
  }
  ::close(in);
  return ok;
}

// One trace being symbolised: opened, followed while its recorder writes it (follow_step),
// then given its names (finish). Not movable (the Symbolizer refers to the reader's model).
class TraceJob {
 public:
  explicit TraceJob(SymbolizeOptions o) : o_(std::move(o)) {}
  TraceJob(const TraceJob&) = delete;
  TraceJob& operator=(const TraceJob&) = delete;

  // kExitOk, or kExitError when the trace cannot be read (said on stderr).
  int open() {
    // (Again when the reading starts over: what refers to the old reading's model goes first.)
    resolver_.reset();
    sym_.reset();
    if (std::string e = defs_.open(o_.file); !e.empty()) {
      print_error(o_.file, e);
      return kExitError;
    }
    Symbolizer::Options so;
    so.use_embedded = false;
    sym_.emplace(defs_.model(), so);
    resolver_.emplace(Resolver{defs_, *sym_, cache_, {}, {}, 0});
    if (!o_.summary.empty()) open_totals();
    return kExitOk;
  }

  bool is_kept_set() const {
    std::string stem;
    return fmt::names_segment_set(o_.file, stem);
  }

  void open_totals() {
    totals_.emplace(summary_replay_options());
    totals_error_.clear();
    if (std::string e = totals_->open(o_.file); !e.empty()) totals_error_ = e;
  }

  // The totals-only replay of the trace, kept up with the recorder while following (for the
  // run's summary), finished: what it read, or why it could not.
  AnalyzeResult totals() {
    AnalyzeResult r;
    if (!totals_ || !totals_error_.empty()) {
      r.error = totals_error_.empty() ? "not replayed" : totals_error_;
      return r;
    }
    try {
      // A reading behind a gap (found before or while it reads what is left) starts over; the
      // recording has ended, so the set does not move on meanwhile. So does the reading of a
      // kept set that did not reach its End while the recording ran (it began in segments
      // removed since): what the set keeps now is read whole, a bounded read.
      for (int again = 0; again < 3; ++again) {
        if (totals_->fell_behind()) open_totals();
        if (!totals_error_.empty()) break;
        totals_->advance();
        if (!totals_->fell_behind() && (again > 0 || !is_kept_set() || totals_->snapshot()->complete)) break;
        if (!totals_->fell_behind()) open_totals();
      }
      if (!totals_error_.empty()) {
        r.error = totals_error_;
        return r;
      }
      totals_->finish();
      r.model = totals_->snapshot();
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    return r;
  }

  enum class Step { Going, Done, GaveUp };
  // Reads and resolves what the recorder has written since the last step. Done once it has let
  // go of the file; GaveUp when the program ended more than 2 s ago and a process still
  // writes the trace (said on stderr: the trace is left without names).
  // `program_ended`: whether the program of the manifest has ended (program_ended()).
  Step follow_step(bool program_ended) {
    const bool alive = defs_.writer_alive();
    // A set that rotates faster than it is followed: what was missed is gone, and the names
    // and totals are of what the set keeps, so its reading starts over at its first segment.
    if (defs_.fell_behind() && open() != kExitOk) return Step::GaveUp;
    if (totals_ && totals_->fell_behind()) open_totals();
    defs_.advance();
    found_new_ = resolver_->catch_up() > 0;
    advance_totals();
    if (!alive) return Step::Done;
    if (program_ended) {
      const auto now = std::chrono::steady_clock::now();
      if (!ended_at_) ended_at_ = now;
      if (now - *ended_at_ > std::chrono::seconds(2)) {
        print_warning(o_.file, "another process still writes this trace; not symbolised (run memtide symbolize on it "
                               "once it has ended)");
        return Step::GaveUp;
      }
    }
    return Step::Going;
  }

  // Whether the last step found return addresses not seen before.
  bool found_new() const { return found_new_; }

  const std::string& file() const { return o_.file; }

  // Resolves the rest and appends the names. The exit status of the command for this trace.
  int finish();

 private:
  const SymbolizeOptions o_;
  DefinitionReader defs_;
  SymbolCache cache_{SymbolCache::default_dir()};
  std::optional<Symbolizer> sym_;
  std::optional<Resolver> resolver_;
  std::optional<std::chrono::steady_clock::time_point> ended_at_;
  bool found_new_ = false;
  std::optional<Session> totals_;  // with --summary
  std::string totals_error_;

  void advance_totals() {
    if (!totals_ || !totals_error_.empty()) return;
    try {
      totals_->advance();
    } catch (const std::exception& e) {
      totals_error_ = e.what();
    }
  }
};

int TraceJob::finish() {
  // A copy (-o) is made under a temporary name beside OUT and renamed to OUT once whole; a
  // segment set's copy is a set named by OUT's base name, each segment made so.
  fmt::FileReader set;
  const fmt::SegmentFiles* segs = set.open(o_.file).ok() ? set.segment_set() : nullptr;
  OutputFile copy;
  std::vector<std::unique_ptr<OutputFile>> seg_copies;
  if (!o_.out.empty()) {
    std::string e;
    if (!segs) {
      e = copy.open(o_.out, {o_.file});
    } else if (const std::string stem = fmt::set_stem(o_.out); !fmt::list_segments(stem).empty()) {
      e = "segments " + stem + ".NNNN.mtide exist already";
    } else if (::access(o_.out.c_str(), F_OK) == 0) {  // (a reader would open that file by this name, not the set)
      e = "the file exists (a set's copy is " + stem + ".NNNN.mtide, read by this name)";
    } else {
      std::vector<std::string> inputs{o_.file};
      for (const fmt::SegmentFiles::Segment& g : segs->segments()) inputs.push_back(g.path);
      for (const fmt::SegmentFiles::Segment& g : segs->segments()) {
        seg_copies.push_back(std::make_unique<OutputFile>());
        if (!(e = seg_copies.back()->open(fmt::segment_name(stem, g.number), inputs)).empty()) break;
      }
    }
    if (!e.empty()) {
      print_error(o_.out, "cannot write the symbolised copy: " + e);
      return kExitError;
    }
  }
  std::string target = o_.out.empty() ? o_.file : segs ? seg_copies.back()->write_path() : copy.write_path();
  const std::string& shown = o_.out.empty() ? o_.file : o_.out;  // (the name said in messages)
  uint64_t end = 0;
  bool whole = false;
  std::string err;
  if (!readable_end(o_.file, end, whole, err)) {
    print_error(o_.file, err);
    return kExitError;
  }
  // A segment set gets its names at the end of its latest segment, where every reader of the
  // set finds them (its older segments are removed first).
  uint64_t cut = end;  // where a failed append cuts the file back to
  if (segs) {
    const fmt::SegmentFiles::Segment& last = segs->segments().back();
    if (o_.out.empty()) target = last.path;
    cut = end - last.base;
  }
  if (o_.out.empty()) {
    if (fmt::is_being_written(o_.file)) {
      print_error(o_.file, "a recorder is still writing this trace; symbolize it when the program has ended");
      return kExitError;
    }
    if (!whole) {
      print_error(o_.file, "the trace ends inside a block (truncated); use -o OUT to write a symbolised copy of the "
                          "readable part");
      return kExitError;
    }
  }
  defs_.advance();
  defs_.finish();
  resolver_->catch_up(true);
  const Model& model = defs_.model();
  if (!o_.out.empty() && !segs && !copy_prefix(o_.file, copy.fd(), end, err)) {
    print_error(o_.out, err);
    return kExitError;
  }
  for (std::size_t i = 0; i < seg_copies.size(); ++i) {  // (each whole, the latest up to its readable end)
    const fmt::SegmentFiles::Segment& g = segs->segments()[i];
    if (!copy_prefix(g.path, seg_copies[i]->fd(), i + 1 < seg_copies.size() ? segs->end_of(i) - g.base : cut, err)) {
      print_error(o_.out, err);
      return kExitError;
    }
  }

  // Distinct return addresses per module.
  std::map<const ModuleInfo*, std::vector<uint64_t>> offsets;
  for (uint64_t ip : resolver_->seen)
    if (const ModuleInfo* m = model.module_at(ip)) offsets[m].push_back(ip - m->load_bias);

  // A failed append (a full disk) leaves the file as it was: the pending block is dropped and
  // what was appended is cut off again, so the trace does not end inside a block.
  fmt::TraceWriter w;
  try {
    w.open_append(target, fmt::TraceWriter::Options{});
  } catch (const std::exception& e) {
    print_error(shown, e.what());
    return kExitError;
  }
  uint64_t modules = 0, addresses = 0, named = 0, skipped = 0, from_cache = 0;
  try {
    for (auto& [m, offs] : offsets) {
      std::sort(offs.begin(), offs.end());
      offs.erase(std::unique(offs.begin(), offs.end()), offs.end());
      if (!o_.force && model.embedded.count(m->id.value)) {
        ++skipped;
        continue;
      }
      if (!cache_.known(*m)) {  // (a cached module was found with its debug information)
        const ModuleState st = sym_->file_state(*m);
        if (st != ModuleState::Ok && st != ModuleState::NoDebugInfo) continue;  // reported below
      }
      std::vector<fmt::SymbolEntry> entries;
      auto flush = [&] {
        if (entries.empty()) return;
        w.append_symbols(0, m->id.value, entries);
        entries.clear();
      };
      for (uint64_t off : offs) {
        bool cached = false;
        uint64_t depth = 0;
        const bool usable = resolver_->each_name(*m, off, &cached, [&](std::string_view fn, std::string_view file, uint64_t line) {
          entries.push_back({off, fn, file, line, depth++});
        });
        if (!usable) continue;  // the file went away meanwhile: reported below
        ++addresses;
        from_cache += cached;
        if (depth == 0)
          entries.push_back({off, {}, {}, 0, 0});  // looked up: nothing to name it by
        else
          ++named;
        if (entries.size() >= 20000) flush();
      }
      flush();
      ++modules;
    }
    w.close();
    cache_.save();
  } catch (const std::exception& e) {
    w.abandon();
    if (!o_.out.empty()) {
      print_error(shown, std::string("cannot write the symbolised copy: ") + e.what());
      return kExitError;
    }
    const bool restored = ::truncate(target.c_str(), static_cast<off_t>(cut)) == 0;
    print_error(target, std::string("cannot append the names: ") + e.what() +
                            (restored ? "; the trace is left as it was" : "; and cannot cut it back: " + std::string(std::strerror(errno))));
    return kExitError;
  }
  if (!o_.out.empty()) {
    std::string e;
    for (std::unique_ptr<OutputFile>& f : seg_copies)  // (the latest last: the set is whole once it is there)
      if (e.empty()) e = f->commit();
    if (!segs) e = copy.commit();
    if (!e.empty()) {
      print_error(shown, "cannot write the symbolised copy: " + e);
      return kExitError;
    }
  }
  if (!o_.quiet) {
    std::cout << printable(shown) << ": " << named << " of " << addresses << " addresses named in " << modules
              << " modules";
    if (from_cache) std::cout << " (" << from_cache << " from the symbol cache)";
    if (skipped) std::cout << " (" << skipped << " modules already symbolised; --force to redo)";
    std::cout << '\n';
  }
  if (resolver_->outside && !o_.quiet)
    print_warning(o_.file, std::to_string(resolver_->outside) + " frames are outside every recorded module");
  for (const ModuleProblem& p : sym_->problems())
    print_warning(o_.file, printable(p.path) + ": " + module_state_name(p.state) + ": " + p.detail + "; not symbolised");
  return kExitOk;
}

int symbolize_trace(const SymbolizeOptions& o) {
  TraceJob job(o);
  if (int e = job.open(); e != kExitOk) return e;
  if (o.follow) {
    TraceJob::Step st;
    PollPause pause(o.poll_ms);
    while ((st = job.follow_step(program_ended(o))) == TraceJob::Step::Going) sleep_ms(pause.next(job.found_new()));
    if (st == TraceJob::Step::GaveUp) return kExitOk;
  }
  return job.finish();
}

// Writes the run's summary to `path` (0600, whole or not at all: write_whole_file), where
// `memtide run` prints it from.
bool write_summary(const std::string& path, std::vector<SummaryEntry>& entries) {
  std::ostringstream text;
  print_summary(entries, text);
  if (std::string e = write_whole_file(path, text.str()); !e.empty()) {
    print_error(path, "cannot write the summary: " + e);
    return false;
  }
  return true;
}

// The lines of a manifest, read as they are appended: its descriptor stays open and each poll
// reads only the bytes added since the last one (no reopening, no stream set up per poll).
class ManifestLines {
 public:
  explicit ManifestLines(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~ManifestLines() {
    if (fd_ >= 0) ::close(fd_);
  }
  ManifestLines(const ManifestLines&) = delete;
  ManifestLines& operator=(const ManifestLines&) = delete;

  // Adds the whole lines written since the last call to `out` (a line still being written
  // waits for its newline). False when the manifest cannot be read, or is no longer linked:
  // no line will come after those given.
  bool read_new(std::deque<std::string>& out) {
    if (fd_ < 0) return false;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return false;
      if (n == 0) break;
      partial_.append(buf, static_cast<std::size_t>(n));
    }
    std::size_t from = 0;
    for (std::size_t nl; (nl = partial_.find('\n', from)) != std::string::npos; from = nl + 1)
      out.emplace_back(partial_, from, nl - from);
    partial_.erase(0, from);
    struct stat st;
    return ::fstat(fd_, &st) == 0 && st.st_nlink > 0;
  }

 private:
  int fd_;
  std::string partial_;
};

// With a manifest (lines "pid\tppid\tpath\n", written as each recorder opens its trace), every
// trace it names, followed side by side: the program's, and those of the programs it started
// (a program's trace also ends when it execs another, whose trace comes next), so that a
// child's names are resolved while it runs, not after the parent ends. Each trace gets its
// names as soon as its recorder lets go of it. The manifest's lines are read until the program
// has ended (MANIFEST.ended, checked before each read, so that every line written before the
// end is seen) or the manifest goes away. At most kMaxJobs traces are open at a time (each may
// hold modules' debug information); later lines wait for a place.
int run_symbolize(SymbolizeOptions o) {
  if (o.manifest.empty()) return symbolize_trace(o);
  constexpr std::size_t kMaxJobs = 16;
  catch_wake();
  int status = kExitOk;
  std::vector<std::unique_ptr<TraceJob>> jobs;
  ManifestLines manifest(o.manifest);
  std::deque<std::string> lines;  // read, not yet taken
  bool all_lines = false;
  // With --summary: one entry per trace, in the manifest's order, its lines filled when its job
  // ends (from the job's own replay, kept up while it followed).
  std::vector<SummaryEntry> entries;
  std::map<std::string, std::size_t> entry_of;  // by path
  auto summarise = [&](const std::string& path, const AnalyzeResult& r) {
    if (o.summary.empty()) return;
    auto it = entry_of.find(path);
    if (it != entry_of.end() && entries[it->second].text.empty()) describe(entries[it->second], r);
  };
  PollPause pause(o.poll_ms);  // a new address or a new trace counts as work
  // `memtide run` (the parent) killed: nobody will say that the program ended. The traces are
  // then followed until none is being written (every process that records has written its
  // manifest line by then), and the manifest, which memtide run would have removed, goes too.
  const pid_t parent = ::getppid();
  bool orphan = false;
  // The program's pid (the manifest's first line). Once it is gone, no wait of `memtide run`
  // may be left to say so (MANIFEST.ended): the end is taken from the process table too.
  pid_t root = 0;
  for (;;) {
    const bool ended = program_ended(o) || (root > 0 && ::kill(root, 0) != 0 && errno == ESRCH);
    orphan = orphan || ::getppid() != parent;
    if (!all_lines) {
      const bool readable = manifest.read_new(lines);
      all_lines = !readable || ended || (orphan && lines.empty() && jobs.empty());
    }
    bool busy = !lines.empty();
    for (; !lines.empty() && jobs.size() < kMaxJobs; lines.pop_front()) {
      SymbolizeOptions to = o;
      if (!manifest_trace_path(lines.front(), to.file)) continue;
      if (root == 0) root = static_cast<pid_t>(std::strtol(lines.front().c_str(), nullptr, 10));
      if (!o.summary.empty() && entry_of.emplace(to.file, entries.size()).second) {
        SummaryEntry e;
        e.pid = lines.front().substr(0, lines.front().find('\t'));
        e.path = to.file;
        entries.push_back(std::move(e));
      }
      auto job = std::make_unique<TraceJob>(to);
      if (int e = job->open(); e != kExitOk) {
        status = std::max(status, e);
        AnalyzeResult unreadable;
        unreadable.error = "not a readable trace";
        summarise(to.file, unreadable);
        continue;
      }
      jobs.push_back(std::move(job));
    }
    for (auto it = jobs.begin(); it != jobs.end();) {
      const TraceJob::Step st = (*it)->follow_step(ended);
      busy |= (*it)->found_new();
      if (st == TraceJob::Step::Going) {
        ++it;
        continue;
      }
      if (st == TraceJob::Step::Done) status = std::max(status, (*it)->finish());
      if (!o.summary.empty()) summarise((*it)->file(), (*it)->totals());
      it = jobs.erase(it);
    }
    if (all_lines && lines.empty() && jobs.empty()) {
      // (Orphaned, no one is left to print the summary.)
      if (!o.summary.empty() && !orphan && !write_summary(o.summary, entries)) status = std::max(status, kExitError);
      if (orphan) {
        ::unlink(o.manifest.c_str());
        ::unlink((o.manifest + ".ended").c_str());
      }
      return status;
    }
    sleep_ms(pause.next(busy));
  }
}

}  // namespace

Command symbolize_command() {
  return {"symbolize", "Append resolved symbols to a trace so that a copy elsewhere still shows names",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<SymbolizeOptions>();
            auto* file = sub.add_option("file", o->file, "Trace file (.mtide)");
            auto* manifest = sub.add_option("--manifest", o->manifest,
                                            "The traces named by this `memtide run` manifest, followed side by side as they appear (implies --follow)");
            file->excludes(manifest);
            sub.add_option("-o,--output", o->out, "Write a symbolised copy here instead of appending to FILE (of a segment set: a set OUT names, "
                           "NAME.NNNN.mtide for OUT NAME.mtide)");
            sub.add_flag("--force", o->force, "Symbolise modules again even if the trace already has their names");
            sub.add_flag("--follow", o->follow,
                         "Read the trace while a recorder writes it, resolving as it goes; append when it has ended");
            sub.add_flag("-q,--quiet", o->quiet, "No summary line (warnings still go to stderr)");
            sub.add_option("--summary", o->summary,
                           "With --manifest: also replay each trace's totals as it is written, and write the run's "
                           "summary (memtide summary's lines) to this file when all have ended")
                ->needs(manifest);
            return [o, file, manifest] {
              if (file->count() == 0 && manifest->count() == 0)
                throw CLI::RequiredError("a trace file (or --manifest)");
              if (!o->manifest.empty()) o->follow = true;
              return run_symbolize(*o);
            };
          }};
}

}  // namespace memtide::cli
