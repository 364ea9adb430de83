// memtide-view: the desktop viewer. `memtide view FILE` runs it.
//
//   memtide-view [FILE]
//   memtide-view --screenshot OUT.png [--view summary|timeline|flamegraph|leaks|tree|compare|growth|sizes]
//                [--width W --height H] [--domain heap|mmap|custom] [--stats] FILE
//   memtide-view --suppressions FILE [--no-builtin-suppressions] TRACE   (the Leaks view hides
//                what `memtide check --suppressions FILE` does)
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "analysis/alloc_site.h"
#include "analysis/suppressions.h"
#include "formats/segment_set.h"
#include "viewer/app.h"
#include "viewer/format.h"
#include "viewer/platform.h"

namespace {

using namespace memtide::viewer;

std::optional<uint64_t> parse_seconds(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return std::nullopt;
  const std::string unit(end);
  const double mult = unit.empty() || unit == "s" ? 1e9 : unit == "ms" ? 1e6 : unit == "us" ? 1e3 : unit == "ns" ? 1 : -1;
  if (mult < 0) return std::nullopt;
  return static_cast<uint64_t>(v * mult);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"memtide-view: the memtide trace viewer", "memtide-view"};
  cli.set_version_flag("--version", std::string("memtide-view ") + MEMTIDE_VERSION);
  std::string file, screenshot, view = "summary", metric, direction, select, search, baseline, theme, domain;
  std::vector<std::string> suppressions;
  bool no_builtin = false;
  RunOptions run;
  float scale = 0;
  int frames = 0;
  cli.add_option("file", file, "Trace file (.mtide) to open");
  cli.add_option("--screenshot", screenshot, "Render one view to this PNG file and exit (works under xvfb-run -a)");
  cli.add_option("--view", view, "View to show")
      ->check(CLI::IsMember({"summary", "timeline", "flamegraph", "leaks", "tree", "compare", "growth", "sizes"}));
  cli.add_option("--width", run.width, "Window width in pixels")->check(CLI::Range(200, 8192));
  cli.add_option("--height", run.height, "Window height in pixels")->check(CLI::Range(150, 8192));
  cli.add_option("--scale", scale, "UI scale (1 = 100 %; HiDPI screens: 1.5, 2)")->check(CLI::Range(0.5, 4.0));
  cli.add_option("--theme", theme, "dark or light")->check(CLI::IsMember({"dark", "light"}));
  cli.add_option("--metric", metric,
                 "Flamegraph metric: allocated, allocations, temporary, leaked, peak, live")
      ->transform([](std::string v) { return v == "count" ? std::string("allocations") : v; })  // (the former CLI name)
      ->check(CLI::IsMember({"allocated", "allocations", "temporary", "leaked", "peak", "live"}));
  cli.add_option("--domain", domain, "Flamegraph, leaks, trees and compare: heap, mmap (anonymous mappings) or custom (memtide_alloc pools)")
      ->check(CLI::IsMember({"heap", "mmap", "custom"}));
  cli.add_option("--direction", direction, "Flamegraph and tree direction")->check(CLI::IsMember({"top-down", "bottom-up"}));
  cli.add_option("--select", select, "Select a time range FROM:TO (e.g. 2s:5.5s) as if dragged on the timeline");
  cli.add_option("--search", search, "Flamegraph search text");
  cli.add_option("--baseline", baseline, "A second trace to compare with (the Compare view)");
  cli.add_option("--suppressions", suppressions,
                 "Leaks view: hide the heap leaks a LeakSanitizer-format suppressions file matches (leak:<glob>), and "
                 "the built-in ones, counted apart (as memtide check does); repeatable")
      ->allow_extra_args(false);  // (one file each time: the trace file follows)
  cli.add_option_function<std::vector<std::string>>(
         "--alloc-fn",
         [](const std::vector<std::string>& v) {
           for (const std::string& p : v) memtide::analysis::AllocFunctions::process().add(p);
         },
         "Leaks and Growth views: a function the program allocates through (a glob as in suppressions: ^my_alloc$), "
         "besides the built-in list (zmalloc, xmalloc, g_malloc, PyMem_Malloc, ...): rows are named after the caller past "
         "it; repeatable")
      ->type_name("GLOB")
      ->allow_extra_args(false);
  cli.add_flag("--no-builtin-suppressions", no_builtin,
               "Do not hide the known one-time allocations of glibc and libstdc++ (hidden by default, as memtide check does)");
  cli.add_flag("--stats", run.stats, "Print frame-time percentiles (while loading and afterwards) at exit");
  cli.add_option("--frames", frames, "Screenshot mode: frames to draw after loading before the picture (measurement)")
      ->check(CLI::Range(0, 100000));
  cli.add_option("--capture-frame", run.capture_frame,
                 "Screenshot mode: take the picture at this frame even if loading has not finished")
      ->check(CLI::Range(1, 1000000));
  cli.add_option("--cycle", run.cycle_frames,
                 "Screenshot mode: first draw this many frames in each view (per-view frame times with --stats)")
      ->check(CLI::Range(0, 100000));
  try {
    cli.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return cli.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "memtide-view: %s\n", e.what());
    return 2;
  }
  const auto kind = parse_view(view);
  if (!kind) {
    std::fprintf(stderr, "memtide-view: unknown view '%s'\n", view.c_str());
    return 2;
  }
  std::optional<TimeRange> range;
  if (!select.empty()) {
    const auto colon = select.find(':');
    const auto a = colon == std::string::npos ? std::nullopt : parse_seconds(select.substr(0, colon));
    const auto b = colon == std::string::npos ? std::nullopt : parse_seconds(select.substr(colon + 1));
    if (!a || !b || *b <= *a) {
      std::fprintf(stderr, "memtide-view: --select wants FROM:TO with FROM < TO, e.g. 2s:5s\n");
      return 2;
    }
    range = TimeRange{*a, *b};
  }
  run.screenshot = screenshot;
  run.extra_frames = frames;
  if (!screenshot.empty() && file.empty()) {
    std::fprintf(stderr, "memtide-view: --screenshot needs a trace file\n");
    return 2;
  }

  // A file that cannot be read is said here, before a window opens (or fails to, without a
  // display): "no such file" is the answer, not "no display".
  for (const std::string* f : {&file, &baseline}) {
    if (std::string stem; f->empty() || memtide::fmt::names_segment_set(*f, stem)) continue;  // (a set: the loader opens it)
    struct stat st {};
    const int fd = ::open(f->c_str(), O_RDONLY | O_CLOEXEC);
    const int err = fd < 0 ? errno : (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) ? EISDIR : 0);
    if (fd >= 0) ::close(fd);
    if (err) {
      std::fprintf(stderr, "memtide-view: cannot open %s: %s\n", f->c_str(), std::strerror(err));
      return 2;
    }
  }

  AppOptions ao;
  // The built-in suppressions by default, as memtide check and report apply them: all three
  // list the same leaks.
  if (!suppressions.empty() || !no_builtin) {
    auto supp = std::make_shared<memtide::analysis::SuppressionList>();
    std::string err;
    std::vector<std::string> notes;
    if (suppressions.empty()) {
      supp->add_builtin();
    } else if (!memtide::analysis::load_suppressions(*supp, suppressions, !no_builtin, err, notes)) {
      std::fprintf(stderr, "memtide-view: %s\n", err.c_str());
      return 2;
    }
    for (const std::string& n : notes) std::fprintf(stderr, "memtide-view: note: %s\n", n.c_str());
    ao.suppressions = std::move(supp);
  }
  // Screenshots are reproducible: no settings read, no recent list written.
  ao.config_dir = screenshot.empty() ? config_dir() : std::string();
  ao.remember = screenshot.empty();
  App app(ao);
  if (scale > 0) app.set_scale(scale);
  if (!theme.empty()) app.set_dark(theme == "dark");
  run.setup = [&](App& a) {
    if (!file.empty()) a.open(file);
    if (!baseline.empty()) a.open_baseline(baseline);
    if (range) a.set_selection(*range);
    a.select_view(*kind);
    if (!metric.empty()) {
      const memtide::analysis::Metric m = metric == "allocated"     ? memtide::analysis::Metric::Allocated
                                 : metric == "allocations" ? memtide::analysis::Metric::Count
                                 : metric == "temporary"   ? memtide::analysis::Metric::Temporary
                                 : metric == "leaked"      ? memtide::analysis::Metric::Leaked
                                 : metric == "peak"        ? memtide::analysis::Metric::Peak
                                                           : memtide::analysis::Metric::LiveAt;
      a.flamegraph().metric = m;
      a.compare().metric = m;
    }
    if (!direction.empty()) {
      const Direction d = direction == "bottom-up" ? Direction::BottomUp : Direction::TopDown;
      a.flamegraph().direction = d;
      a.tree().direction = d;
    }
    if (!search.empty()) a.flamegraph().widget.search = search;
    if (domain == "mmap") a.set_domain(memtide::analysis::Domain::Mmap);
    if (domain == "custom") a.set_domain(memtide::analysis::Domain::Custom);
  };
  return run_viewer(app, run);
}
