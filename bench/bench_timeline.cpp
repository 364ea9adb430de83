// memtide-bench-timeline FILE [--replay]: the viewer's whole-run timeline (heap, RSS, mapped,
// marks) of FILE as the loader shows it first on opening (scan_timeline: no replay), or with
// --replay as a full replay makes it. Prints the time taken and what the timeline holds.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "analysis/replay.h"
#include "viewer/timeline_model.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && std::strcmp(argv[2], "--replay") != 0)) {
    std::fprintf(stderr, "usage: memtide-bench-timeline FILE [--replay]\n");
    return 2;
  }
  using namespace memtide;
  const auto t0 = std::chrono::steady_clock::now();
  viewer::TimelineData d;
  if (argc == 3) {
    analysis::ReplayOptions o;
    o.series_points = 4096;
    analysis::AnalyzeResult r = analysis::analyze_file(argv[1], o);
    if (!r.ok()) {
      std::fprintf(stderr, "memtide-bench-timeline: %s: %s\n", argv[1], r.error.c_str());
      return 2;
    }
    d = viewer::make_timeline(*r.model);
  } else {
    d = viewer::scan_timeline(argv[1], 4096);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.3f s: %.1f s of run, %zu heap points, %zu RSS, %zu mapped, %zu marks%s\n", s,
              static_cast<double>(d.duration) / 1e9, d.heap.size(), d.rss.size(), d.mapped.size(), d.markers.size(),
              d.coarse ? " (heap and mapped at the checkpoints)" : "");
  return d.duration ? 0 : 1;
}
