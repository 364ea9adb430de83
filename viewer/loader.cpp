// Sections: [1] the thread (the requests of the UI thread: loader_requests.cpp)  [2] building views  [3] jobs: choosing one, then one method
//           per job (open, window, baseline, extend, compare window, refresh)
#include "viewer/loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>

#include "analysis/replay.h"
#include "analysis/symbols.h"
#include "formats/reader.h"
#include "formats/segment_set.h"
#include "viewer/compare_model.h"

namespace memtide::viewer {

using analysis::Metric;
using Clock = std::chrono::steady_clock;

namespace {

// Thrown from a check point when the job's inputs changed: unwinds the job.
struct Stale {};
// A check point of a job (throws Stale).
using Check = std::function<void()>;

// (A segment set's: its end in the set's offsets, which only grows.)
uint64_t file_size(const std::string& path) {
  if (std::string stem; fmt::names_segment_set(path, stem)) {
    fmt::FileReader r;
    return r.open(path).ok() ? r.size() : 0;
  }
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Which recording a path holds: the file (device, inode) and its first bytes (the file header
// and the first block's header, whose checksum covers the process record). A new recording to
// the same path (`memtide run -o` removes the old file first) or a file rewritten in place
// differs in one of them.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  std::array<uint8_t, fmt::kFileHeaderSize + fmt::kBlockHeaderSize> head{};
  std::size_t head_len = 0;  // 0: the file could not be read
};

FileIdentity identity_of(const std::string& path) {
  FileIdentity id;
  // A segment set: its stem and the bytes its segments' headers share (magic, version, size).
  if (std::string stem; fmt::names_segment_set(path, stem)) {
    const std::vector<fmt::SegmentPath> segs = fmt::list_segments(stem);
    const int fd = segs.empty() ? -1 : ::open(segs.back().path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return id;
    const ssize_t n = ::pread(fd, id.head.data(), 16, 0);
    id.head_len = n > 0 ? static_cast<std::size_t>(n) : 0;
    ::close(fd);
    return id;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return id;
  struct stat st {};
  if (::fstat(fd, &st) == 0) {
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    const ssize_t n = ::pread(fd, id.head.data(), id.head.size(), 0);
    id.head_len = n > 0 ? static_cast<std::size_t>(n) : 0;
  }
  ::close(fd);
  return id;
}

// The same recording, perhaps further along: the same file, and the bytes both have read at
// its start agree (a recording that had only its header at the first look has more later).
bool same_recording(const FileIdentity& was, const FileIdentity& now) {
  const std::size_t n = std::min(was.head_len, now.head_len);
  return was.dev == now.dev && was.ino == now.ino && std::memcmp(was.head.data(), now.head.data(), n) == 0;
}

// The order metrics are built in: what is looked at first comes first.
constexpr Metric kBuildOrder[] = {Metric::Allocated, Metric::Peak, Metric::Leaked,
                                  Metric::Count,     Metric::Temporary, Metric::LiveAt};

std::shared_ptr<const std::vector<std::string>> problems_of(const analysis::Symbolizer& sym) {
  auto v = std::make_shared<std::vector<std::string>>();
  for (const analysis::ModuleProblem& p : sym.problems())
    v->push_back(std::string(analysis::basename_of(p.path)) + ": " + analysis::module_state_name(p.state) +
                 (p.detail.empty() ? "" : " (" + p.detail + ")"));
  return v;
}

// Whether a symbolizer made for `a` resolves the addresses of `b` the same way: the same
// modules (loaded and unloaded at the same times) and embedded symbols.
bool same_symbols(const analysis::Model& a, const analysis::Model& b) {
  if (a.modules.size() != b.modules.size() || a.embedded.size() != b.embedded.size()) return false;
  for (std::size_t i = 0; i < a.modules.size(); ++i)
    if (a.modules[i].id != b.modules[i].id || a.modules[i].unload_time != b.modules[i].unload_time) return false;
  for (const auto& [id, v] : a.embedded) {
    auto it = b.embedded.find(id);
    if (it == b.embedded.end() || it->second.size() != v.size()) return false;
  }
  return true;
}

}  // namespace

struct Loader::Work {
  std::string path;
  std::shared_ptr<const analysis::Model> base;
  // What the symbolizer reads (modules, embedded symbols, stacks): a copy of those parts of
  // *base, so that a live refresh can keep the symbolizer and its cache and only grow the
  // stacks. Reset after the symbolizer.
  std::unique_ptr<analysis::Model> sym_model;
  std::unique_ptr<analysis::Symbolizer> sym;  // bound to *sym_model
  std::shared_ptr<const ViewData> whole;
  std::unique_ptr<analysis::Session> live;  // the replay that a live file's refreshes resume
  const char* live_phase = "reading";
  bool following = false;
  uint64_t last_size = 0;
  FileIdentity identity;  // of the recording being followed
  // Following with a range selected: the replay of that range, resumed at each refresh like
  // `live`, and what the job running it checks for staleness while it reads.
  std::unique_ptr<analysis::Session> live_window;
  TimeRange live_window_range;
  std::function<void()> window_check;
  uint64_t window_bytes = 0;  // read by the last advance of live_window
  bool reopen = false;    // the path now holds another recording: read it from the start
  Clock::time_point next_refresh{};
  uint64_t refreshes = 0;

  std::string baseline_path;
  std::shared_ptr<const analysis::Model> baseline;       // the whole baseline trace
  std::unique_ptr<analysis::Symbolizer> baseline_sym;    // bound to *baseline
  std::string baseline_error;
  std::shared_ptr<const BaselineView> baseline_whole;
  std::shared_ptr<const BaselineView> baseline_window;  // the last window asked for

  // `keep_symbols`: keep the symbolizer when the modules did not change (a live refresh).
  void set_base(std::shared_ptr<const analysis::Model> m, bool keep_symbols = false) {
    base = std::move(m);
    if (keep_symbols && sym && same_symbols(*sym_model, *base)) {
      sym_model->stack_table = base->stack_table;
      return;
    }
    sym.reset();
    sym_model = std::make_unique<analysis::Model>();
    sym_model->modules = base->modules;
    sym_model->embedded = base->embedded;
    sym_model->stack_table = base->stack_table;
    sym = std::make_unique<analysis::Symbolizer>(*sym_model);
  }
  void reset_baseline(const std::string& path) {
    baseline_path = path;
    baseline_window.reset();
    baseline_whole.reset();
    baseline_sym.reset();
    baseline.reset();
    baseline_error.clear();
  }
};

// ---------------------------------------------------------------------------------------
// [1] Thread
// ---------------------------------------------------------------------------------------

Loader::Loader(Options o) : opt_(o), current_(std::make_shared<Snapshot>()), work_(std::make_unique<Work>()) {
  thread_ = std::thread([this] { run(); });
}

Loader::~Loader() {
  {
    std::lock_guard lk(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool Loader::idle() const {
  std::lock_guard lk(mu_);
  return !running_ && want_.path_gen == have_.path_gen && want_.window_gen == have_.window_gen &&
         want_.baseline_gen == have_.baseline_gen && !view_missing_locked() && !compare_missing_locked();
}

// ---------------------------------------------------------------------------------------
// [2] Building views (loader thread)
// ---------------------------------------------------------------------------------------

namespace {

// The whole trace is replayed with the history of live bytes by stack (the Growth view).
analysis::ReplayOptions whole_trace_options() {
  analysis::ReplayOptions o;
  o.stack_history = true;
  return o;
}

struct Needs {
  std::array<bool, kMetricCount> metrics{};
  bool tables = false;
  std::array<bool, analysis::kDomainCount> domains{};
};

bool has_all(const ViewData& v, const Needs& n) {
  if (!v.leaks) return false;
  for (unsigned m = 0; m < kMetricCount; ++m)
    if ((n.metrics[m] || n.tables) && (!v.flames[m][0] || !v.flames[m][1])) return false;
  for (unsigned d = 1; d < analysis::kDomainCount; ++d)
    if (n.domains[d] && !v.domains[d]) return false;
  return !n.tables || (v.tables[0] && v.tables[1]);
}

// Leaks, the flamegraphs of every metric and the tree tables of a domain other than the heap.
template <class Check>
std::shared_ptr<const DomainData> build_domain(const analysis::Model& m, analysis::Symbolizer& sym, analysis::Domain dom,
                                               Check&& check) {
  auto x = std::make_shared<DomainData>();
  x->leaks = std::make_shared<LeaksData>(make_leaks(m, sym, dom));
  for (unsigned d = 0; d < 2; ++d) {
    std::array<std::shared_ptr<const analysis::CallTree>, kMetricCount> trees;
    for (unsigned k = 0; k < kMetricCount; ++k) {
      auto tree = std::make_shared<analysis::CallTree>();
      tree->build(m, sym, dom, static_cast<Metric>(k), d == 1);
      trees[k] = tree;
      x->trees[k][d] = tree;
      x->flames[k][d] = std::make_shared<FlameTree>(make_flame_tree(std::move(tree)));
      check();
    }
    x->tables[d] = std::make_shared<TreeTable>(make_tree_table(trees));
  }
  return x;
}

// Leaks, the call trees of the wanted metrics in both directions, the tree tables when wanted
// (they need every metric); what is already built is kept. `check` throws Stale; `partial`
// publishes what is built so far (may do nothing).
template <class Check, class Partial>
void build_view(ViewData& v, analysis::Symbolizer& sym, Check&& check, Partial&& partial,
                const std::function<void(const char*, float)>& phase, const Needs& needs) {
  const analysis::Model& m = *v.model;
  if (!v.leaks) {
    phase("leaks", -1);
    v.leaks = std::make_shared<LeaksData>(make_leaks(m, sym));
    check();
    partial(v);
  }
  int done = 0;
  for (Metric metric : kBuildOrder) {
    const auto mi = static_cast<unsigned>(metric);
    ++done;
    if ((!needs.metrics[mi] && !needs.tables) || (v.flames[mi][0] && v.flames[mi][1])) continue;
    phase("call trees", static_cast<float>(done - 1) / std::size(kBuildOrder));
    for (unsigned d = 0; d < 2; ++d) {
      auto tree = std::make_shared<analysis::CallTree>();
      tree->build(m, sym, analysis::Domain::Heap, metric, d == 1);
      std::shared_ptr<const analysis::CallTree> ct = tree;
      v.trees[static_cast<unsigned>(metric)][d] = ct;
      v.flames[static_cast<unsigned>(metric)][d] = std::make_shared<FlameTree>(make_flame_tree(ct));
      check();
    }
    partial(v);
  }
  for (unsigned d = 1; d < analysis::kDomainCount; ++d)
    if (needs.domains[d] && !v.domains[d]) {
      phase(d == static_cast<unsigned>(analysis::Domain::Mmap) ? "mappings" : "custom pools", -1);
      v.domains[d] = build_domain(m, sym, static_cast<analysis::Domain>(d), check);
      partial(v);
    }
  if (needs.tables && (!v.tables[0] || !v.tables[1])) {
    phase("tables", -1);
    for (unsigned d = 0; d < 2; ++d) {
      std::array<std::shared_ptr<const analysis::CallTree>, kMetricCount> trees;
      for (unsigned k = 0; k < kMetricCount; ++k) trees[k] = v.trees[k][d];
      v.tables[d] = std::make_shared<TreeTable>(make_tree_table(trees));
    }
  }
  v.complete = has_all(v, needs);
}

template <class Want>  // Loader::Want
Needs needs_of(const Want& w) {
  return Needs{w.metrics, w.tables, w.domains};
}

}  // namespace

// ---------------------------------------------------------------------------------------
// [3] Jobs
// ---------------------------------------------------------------------------------------

bool Loader::view_missing_locked() const {
  return current_->loaded() && current_->view && !has_all(*current_->view, needs_of(want_));
}

bool Loader::compare_missing_locked() const {
  const CompareData* c = current_->compare.get();
  if (!c || !current_->loaded() || !current_->view) return false;
  return c->pending || (c->complete && c->window != current_->view->window);
}

// One job's inputs (the wanted state when it started) and the views it works with. The checks
// throw Stale when an input the job depends on has changed since.
struct Loader::Job {
  Loader& l;
  Work& w;
  Want want;
  Needs needs;
  uint64_t path_gen = 0, window_gen = 0, baseline_gen = 0;

  Job(Loader& loader, const Want& wanted)
      : l(loader),
        w(*loader.work_),
        want(wanted),
        needs(needs_of(wanted)),
        path_gen(wanted.path_gen),
        window_gen(wanted.window_gen),
        baseline_gen(wanted.baseline_gen) {}

  bool stale_path() const {
    std::lock_guard lk(l.mu_);
    return l.quit_ || l.want_.path_gen != path_gen;
  }
  void check_path() const {
    if (stale_path()) throw Stale{};
  }
  void check_window() const {
    std::lock_guard lk(l.mu_);
    if (l.quit_ || l.want_.path_gen != path_gen || l.want_.window_gen != window_gen) throw Stale{};
  }
  void check_baseline() const {
    std::lock_guard lk(l.mu_);
    if (l.quit_ || l.want_.path_gen != path_gen || l.want_.baseline_gen != baseline_gen) throw Stale{};
  }
  void check_compare() const {
    std::lock_guard lk(l.mu_);
    if (l.quit_ || l.want_.path_gen != path_gen || l.want_.window_gen != window_gen ||
        l.want_.baseline_gen != baseline_gen)
      throw Stale{};
  }
  void phase(const char* p, float f) const { l.set_phase(p, f); }
  std::function<void(const char*, float)> phase_fn() const {
    return [this](const char* p, float f) { phase(p, f); };
  }

  analysis::AnalyzeResult analyze(const std::string& path, analysis::ReplayOptions o, const char* what,
                                  const Check& check) const {
    o.series_points = l.opt_.series_points;
    o.progress = [&](uint64_t done, uint64_t size) {
      phase(what, size ? static_cast<float>(static_cast<double>(done) / static_cast<double>(size)) : -1.f);
      check();
    };
    return analysis::analyze_file(path, o);
  }

  // The view of window `r` (the whole trace's when it is empty, or when the window cannot be read).
  std::shared_ptr<const ViewData> window_view(TimeRange r, const Check& check) {
    w.window_bytes = 0;
    if (r.empty()) return w.whole;
    analysis::ReplayOptions o;
    o.from = r.from;
    o.to = r.to;
    o.at = r.to;
    analysis::AnalyzeResult res;
    if (!w.following) {
      // One replay of the range, from the checkpoint before it up to its end (analysis/replay.h).
      o.series_points = l.opt_.series_points;
      o.progress = [&](uint64_t done, uint64_t size) {
        phase("reading the window", size ? static_cast<float>(static_cast<double>(done) / static_cast<double>(size)) : -1.f);
        check();
      };
      analysis::Session session(std::move(o));
      res.error = session.open(w.path);
      if (!res.error.empty()) return w.whole;
      session.advance();
      session.finish();
      res.model = session.snapshot();
      w.window_bytes = session.bytes_read();
    } else if (l.opt_.incremental) {
      // A file still being written: one replay of the range, advanced over what each refresh
      // appends, as for the whole trace (a new range starts a new one).
      const bool writer = fmt::is_being_written(w.path);
      if (!w.live_window || w.live_window->broken() || w.live_window_range != r) {
        w.live_window.reset();
        o.series_points = l.opt_.series_points;
        // (The session outlives this job: its progress refers to the loader and its state.)
        o.progress = [loader = &l, work = &w](uint64_t done, uint64_t size) {
          loader->set_phase("reading the window", size ? static_cast<float>(static_cast<double>(done) / size) : -1.f);
          if (work->window_check) work->window_check();
        };
        auto session = std::make_unique<analysis::Session>(std::move(o));
        res.error = session->open(w.path);
        if (!res.error.empty()) return w.whole;
        w.live_window = std::move(session);
        w.live_window_range = r;
      }
      w.window_check = [&] { check(); };
      const uint64_t before = w.live_window->bytes_read();
      try {
        w.live_window->advance();
      } catch (...) {
        w.window_check = nullptr;
        throw;
      }
      w.window_check = nullptr;
      if (!writer) w.live_window->finish();
      res.model = w.live_window->snapshot();
      w.window_bytes = w.live_window->bytes_read() - before;
      if (!writer) w.live_window.reset();
    } else {
      res = analyze(w.path, o, "reading the window", check);
      w.window_bytes = file_size(w.path);
    }
    if (!res.ok()) return w.whole;
    ViewData v;
    v.window = r;
    v.bytes_read = w.window_bytes;
    v.model = std::shared_ptr<const analysis::Model>(std::move(res.model));
    v.summary = std::make_shared<SummaryData>(make_summary(*v.model, w.path, w.following));
    build_view(v, *w.sym, check, [](const ViewData&) {}, phase_fn(), needs);
    return std::make_shared<ViewData>(std::move(v));
  }

  // The baseline analysed for window `r` (the same times since its own start); cached for the
  // whole trace and the last window.
  std::shared_ptr<const BaselineView> baseline_for(TimeRange r, const Check& check) {
    if (!w.baseline) return nullptr;
    if (r.empty()) return w.baseline_whole;
    if (w.baseline_window && w.baseline_window->window == r) return w.baseline_window;
    analysis::ReplayOptions o;
    o.from = r.from;
    o.to = r.to;
    o.at = r.to;
    analysis::AnalyzeResult res = analyze(w.baseline_path, o, "reading the baseline's window", check);
    if (!res.ok()) return nullptr;
    phase("baseline call trees", -1);
    w.baseline_window = std::make_shared<BaselineView>(make_baseline_view(
        std::shared_ptr<const analysis::Model>(std::move(res.model)), *w.baseline_sym, r, [&] { check(); }));
    return w.baseline_window;
  }

  // Differences of the main trace's view `v` to the baseline for the same window; `pending`
  // when the baseline's analysis of that window is not made yet.
  std::shared_ptr<const CompareData> compare_for(const ViewData* v) const {
    if (w.baseline_path.empty()) return nullptr;
    std::shared_ptr<const BaselineView> b;
    if (v && w.baseline)
      b = v->window.empty() ? w.baseline_whole
          : w.baseline_window && w.baseline_window->window == v->window ? w.baseline_window
                                                                          : nullptr;
    if (b) return std::make_shared<CompareData>(make_compare(w.baseline_path, *b, *v));
    auto c = std::make_shared<CompareData>();
    c->path = w.baseline_path;
    c->error = w.baseline_error;
    c->window = v ? v->window : TimeRange{};
    c->pending = w.baseline && v;
    return c;
  }
};

// The most urgent job the wanted state asks for (mu_ held), or None.
Loader::JobKind Loader::next_job_locked() const {
  const Work& w = *work_;
  const bool loaded = w.base != nullptr;
  if (want_.path_gen != have_.path_gen || w.reopen) return JobKind::Open;
  if (loaded && want_.window_gen != have_.window_gen) return JobKind::Window;
  if (want_.baseline_gen != have_.baseline_gen) return JobKind::Baseline;  // the file is open (or failed to)
  if (loaded && view_missing_locked()) return JobKind::Extend;
  if (loaded && compare_missing_locked()) return JobKind::CompareWindow;
  if (w.following && !want_.paused && Clock::now() >= w.next_refresh) return JobKind::Refresh;
  return JobKind::None;
}

void Loader::run() {
  const Work& w = *work_;
  for (;;) {
    JobKind kind = JobKind::None;
    Want want;
    {
      std::unique_lock lk(mu_);
      for (;;) {
        running_ = false;
        progress_.busy = false;
        if (!retired_.empty()) {  // free them here, outside the lock
          std::vector<std::shared_ptr<const Snapshot>> dead;
          dead.swap(retired_);
          lk.unlock();
          dead.clear();
          lk.lock();
          continue;
        }
        if (quit_) return;
        kind = next_job_locked();
        if (kind != JobKind::None) break;
        if (w.following && !want_.paused)
          cv_.wait_until(lk, w.next_refresh);
        else
          cv_.wait(lk);
      }
      want = want_;
      running_ = true;
      progress_ = {true, "starting", -1};
    }
    Job j(*this, want);
    try {
      switch (kind) {
        case JobKind::Open: open_job(j); break;
        case JobKind::Window: window_job(j); break;
        case JobKind::Baseline: baseline_job(j); break;
        case JobKind::Extend: extend_job(j); break;
        case JobKind::CompareWindow: compare_window_job(j); break;
        case JobKind::Refresh: refresh_job(j); break;
        case JobKind::None: break;
      }
    } catch (const Stale&) {
      // The wanted state changed: the loop picks the next job.
    }
  }
}

// The file to show (a new one, or the followed path now holding another recording).
void Loader::open_job(Job& j) {
  Work& w = *work_;
  const Want& want = j.want;
  const uint64_t path_gen = j.path_gen, window_gen = j.window_gen;
  const Check check_path = [&j] { j.check_path(); };
  const bool replaced = w.reopen && w.path == want.path;
  w.path = want.path;
  w.following = false;
  w.reopen = false;
  w.live.reset();
  w.live_window.reset();
  const auto t0 = Clock::now();
  w.identity = identity_of(w.path);
  w.last_size = file_size(w.path);
  if (!replaced) {
    // The whole run's timeline first, read without a replay (a fraction of its time), shown
    // while the replay runs; the replay's, finer, replaces it. (A followed file read again
    // keeps showing what it showed until then.)
    set_phase("reading the timeline", -1.f);
    auto early = std::make_shared<Snapshot>();
    early->path = w.path;
    auto t = std::make_shared<TimelineData>(scan_timeline(w.path, opt_.series_points));
    if (t->duration) {
      early->timeline = std::move(t);
      j.check_path();
      publish(early);
    }
  }
  analysis::AnalyzeResult res;
  if (opt_.follow && opt_.incremental && fmt::is_being_written(w.path)) {
    // Still being written: a replay that the refreshes resume.
    analysis::ReplayOptions o;
    o.series_points = opt_.series_points;
    o.stack_history = true;
    o.progress = [this, &w, path_gen](uint64_t done, uint64_t size) {
      set_phase(w.live_phase, size ? static_cast<float>(static_cast<double>(done) / size) : -1.f);
      std::lock_guard lk(mu_);
      if (quit_ || want_.path_gen != path_gen) throw Stale{};
    };
    auto session = std::make_unique<analysis::Session>(std::move(o));
    res.error = session->open(w.path);
    if (res.error.empty()) {
      w.live_phase = "reading";
      session->advance();
      res.model = session->snapshot();
      w.live = std::move(session);
    }
  } else {
    res = j.analyze(w.path, whole_trace_options(), "reading", check_path);
  }
  auto s = std::make_shared<Snapshot>();
  s->path = w.path;
  if (!res.ok()) {
    s->error = res.error.empty() ? "cannot read the file" : res.error;
    w.sym.reset();
    w.base.reset();
    w.whole.reset();
    j.check_path();
    publish(s);
    std::lock_guard lk(mu_);
    have_.path_gen = path_gen;
    have_.window_gen = window_gen;
    return;
  }
  if (replaced)
    res.model->warnings.insert(res.model->warnings.begin(),
                               "the file was replaced (another recording) or cut short while it was followed: read again from its start");
  w.set_base(std::shared_ptr<const analysis::Model>(std::move(res.model)));
  w.following = opt_.follow && fmt::is_being_written(w.path);
  w.next_refresh = Clock::now() + opt_.live_interval;
  w.refreshes = 1;
  s->base = w.base;
  s->live = w.following;
  s->writer_alive = w.following;
  s->refreshes = w.refreshes;
  s->summary = std::make_shared<SummaryData>(make_summary(*w.base, w.path, w.following));
  s->timeline = std::make_shared<TimelineData>(make_timeline(*w.base));
  s->growth = std::make_shared<GrowthData>(make_growth(*w.base, *w.sym));
  ViewData v;
  v.model = w.base;
  v.summary = s->summary;
  s->view = std::make_shared<ViewData>(v);
  s->analysis_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  j.check_path();
  publish(s);
  build_view(
      v, *w.sym, check_path,
      [&](const ViewData& part) {
        auto p = copy_current();
        p->view = std::make_shared<ViewData>(part);
        j.check_path();
        publish(p);
      },
      j.phase_fn(), j.needs);
  w.whole = std::make_shared<ViewData>(std::move(v));
  auto done = copy_current();
  done->view = w.whole;
  done->symbol_problems = problems_of(*w.sym);
  done->analysis_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  j.check_path();
  publish(done);
  std::lock_guard lk(mu_);
  have_.path_gen = path_gen;
  have_.window_gen = 0;  // the window (if any) is analysed next
  if (!want_.baseline.empty()) have_.baseline_gen = 0;  // differences to the new trace
}

// A time window was selected (or cleared).
void Loader::window_job(Job& j) {
  auto view = j.window_view(j.want.window, [&j] { j.check_window(); });
  auto s = copy_current();
  s->view = view;
  j.check_window();
  publish(s);
  std::lock_guard lk(mu_);
  have_.window_gen = j.window_gen;
}

// A baseline to compare with was opened (or closed).
void Loader::baseline_job(Job& j) {
  Work& w = *work_;
  const Want& want = j.want;
  const Check check_baseline = [&j] { j.check_baseline(); };
  if (w.baseline_path != want.baseline || want.baseline.empty() || !w.baseline_whole) {
    w.reset_baseline(want.baseline);
    if (!want.baseline.empty()) {
      analysis::AnalyzeResult res = j.analyze(want.baseline, {}, "reading the baseline", check_baseline);
      if (!res.ok()) {
        w.baseline_error = res.error;
      } else {
        std::shared_ptr<const analysis::Model> bm(std::move(res.model));
        auto bsym = std::make_unique<analysis::Symbolizer>(*bm);
        j.phase("baseline call trees", -1);
        auto whole = std::make_shared<BaselineView>(make_baseline_view(bm, *bsym, {}, check_baseline));
        w.baseline = bm;
        w.baseline_sym = std::move(bsym);
        w.baseline_whole = std::move(whole);
      }
    }
  }
  j.phase("differences", -1);
  auto s = copy_current();
  s->compare = j.compare_for(s->view.get());
  j.check_baseline();
  publish(s);
  std::lock_guard lk(mu_);
  have_.baseline_gen = j.baseline_gen;
}

// A view asked for a metric (or the tables) not built yet.
void Loader::extend_job(Job& j) {
  Work& w = *work_;
  std::shared_ptr<const ViewData> cur = copy_current()->view;
  ViewData v = *cur;
  build_view(v, *w.sym, [&j] { j.check_window(); }, [](const ViewData&) {}, j.phase_fn(), j.needs);
  auto built = std::make_shared<ViewData>(std::move(v));
  auto s = copy_current();
  s->view = built;
  if (built->window.empty()) w.whole = built;
  if (!w.baseline_path.empty()) s->compare = j.compare_for(built.get());
  j.check_window();
  publish(s);
}

// The selection changed: the baseline follows it.
void Loader::compare_window_job(Job& j) {
  std::shared_ptr<const ViewData> view = copy_current()->view;
  if (!j.baseline_for(view->window, [&j] { j.check_compare(); })) {
    auto s = copy_current();  // the baseline cannot be read again: say so, stop asking
    auto c = std::make_shared<CompareData>(*s->compare);
    c->pending = false;
    c->complete = false;
    c->error = "cannot read the baseline for the selected range";
    s->compare = c;
    publish(s);
    return;
  }
  j.phase("differences", -1);
  auto s = copy_current();
  s->compare = j.compare_for(view.get());
  j.check_compare();
  publish(s);
}

// A followed file: what was appended since the last look.
void Loader::refresh_job(Job& j) {
  Work& w = *work_;
  const Check check_path = [&j] { j.check_path(); };
  const uint64_t size = file_size(w.path);
  const bool writer = fmt::is_being_written(w.path);
  w.next_refresh = Clock::now() + opt_.live_interval;
  const FileIdentity id = identity_of(w.path);
  if (id.head_len == 0) return;  // gone for now (a new recording about to take the path?)
  if (size < w.last_size || !same_recording(w.identity, id)) {
    // Another recording now has this path, or the file was cut short: what was read so far is
    // not in it. The next job reads it from the start.
    w.reopen = true;
    return;
  }
  if (id.head_len > w.identity.head_len) w.identity = id;
  if (size == w.last_size && writer) return;  // nothing new yet
  const auto t0 = Clock::now();
  analysis::AnalyzeResult res;
  uint64_t bytes = 0;
  if (w.live && !w.live->broken()) {
    // Only the blocks appended since the last refresh; the last one (the writer is gone) also
    // releases the events after the last watermark.
    const uint64_t before = w.live->bytes_read();
    w.live_phase = "refreshing";
    w.live->advance();
    if (!writer) w.live->finish();
    res.model = w.live->snapshot();
    bytes = w.live->bytes_read() - before;
  } else {
    res = j.analyze(w.path, whole_trace_options(), "refreshing", check_path);
    bytes = size;
  }
  if (!writer) w.live.reset();
  if (!res.ok()) return;
  w.last_size = size;
  w.set_base(std::shared_ptr<const analysis::Model>(std::move(res.model)), opt_.incremental);
  ViewData v;
  v.model = w.base;
  v.summary = std::make_shared<SummaryData>(make_summary(*w.base, w.path, writer));
  build_view(v, *w.sym, check_path, [](const ViewData&) {}, j.phase_fn(), j.needs);
  w.whole = std::make_shared<ViewData>(std::move(v));
  auto view = j.window_view(j.want.window, check_path);
  auto s = copy_current();
  s->base = w.base;
  s->summary = w.whole->summary;
  s->timeline = std::make_shared<TimelineData>(make_timeline(*w.base));
  s->growth = std::make_shared<GrowthData>(make_growth(*w.base, *w.sym));
  s->view = view;
  s->writer_alive = writer;
  s->live = writer;
  s->symbol_problems = problems_of(*w.sym);
  s->refreshes = ++w.refreshes;
  s->refresh_bytes = bytes + w.window_bytes;
  s->analysis_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!w.baseline_path.empty()) s->compare = j.compare_for(view.get());
  w.following = writer;  // one last refresh after the writer is gone, then stop
  w.next_refresh = Clock::now() + opt_.live_interval;
  j.check_path();
  publish(s);
  std::lock_guard lk(mu_);
  if (want_.window_gen == j.window_gen) have_.window_gen = j.window_gen;
}

}  // namespace memtide::viewer
