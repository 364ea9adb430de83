// How long one live refresh of the viewer takes on a trace that a recorder is still writing:
// opens FILE with the viewer's loader (viewer/loader.h) as `memtide-view FILE` does, waits for
// N refreshes and prints, for each, its time (analysis and view models, as the status line
// shows it), the bytes it read and how far the view is behind the recording (the age of the
// newest event it shows: the trace's times are this machine's CLOCK_MONOTONIC). --full: every
// refresh analyses the whole file again (the viewer before analysis::Session).
//
//   memtide-bench-live-refresh [--full] [--refreshes N] FILE
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "viewer/loader.h"

using namespace std::chrono_literals;

namespace {
// Seconds since the newest event of `m` (0 when it has none).
double behind(const memtide::analysis::Model& m) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  return m.last_time && now > m.last_time ? static_cast<double>(now - m.last_time) / 1e9 : 0;
}
}  // namespace

int main(int argc, char** argv) {
  memtide::viewer::Loader::Options o;
  int refreshes = 5;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--full") == 0)
      o.incremental = false;
    else if (std::strcmp(argv[i], "--refreshes") == 0 && i + 1 < argc)
      refreshes = std::atoi(argv[++i]);
    else
      path = argv[i];
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: memtide-bench-live-refresh [--full] [--refreshes N] FILE\n");
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  memtide::viewer::Loader l(o);
  l.open(path);
  while (!l.snapshot()->loaded() || !l.idle()) {
    if (!l.snapshot()->error.empty()) {
      std::fprintf(stderr, "memtide-bench-live-refresh: %s\n", l.snapshot()->error.c_str());
      return 2;
    }
    std::this_thread::sleep_for(5ms);
  }
  auto s = l.snapshot();
  std::printf("open: %.2f s (%s), %.2f s behind\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              s->live ? "live" : "not being written", s->base ? behind(*s->base) : 0.0);
  std::fflush(stdout);
  uint64_t seen = s->refreshes;
  for (int n = 0; n < refreshes && s->live;) {
    std::this_thread::sleep_for(5ms);
    s = l.snapshot();
    if (s->refreshes == seen) continue;
    seen = s->refreshes;
    ++n;
    std::printf("refresh %d at %.1f s: %.3f s, read %.1f MiB, %.1f million events so far, %.2f s behind\n", n,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), s->analysis_seconds,
                static_cast<double>(s->refresh_bytes) / (1 << 20), static_cast<double>(s->base->events) / 1e6,
                behind(*s->base));
    std::fflush(stdout);
  }
  return 0;
}
