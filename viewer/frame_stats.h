// Frame times: a ring buffer of the last frames' durations, with percentiles, kept apart for
// frames drawn while the loader was busy and after it finished.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

struct ImDrawData;

namespace memtide::viewer {

class FrameRing {
 public:
  explicit FrameRing(std::size_t capacity = 4096) : buf_(capacity) {}
  void add(double ms);
  std::size_t size() const { return count_ < buf_.size() ? count_ : buf_.size(); }
  uint64_t total() const { return count_; }
  // Percentile (0..100) of the frames in the buffer; 0 when empty.
  double percentile(double p) const;
  double max() const;
  double last() const { return count_ ? buf_[(count_ - 1) % buf_.size()] : 0; }

 private:
  std::vector<double> buf_;
  uint64_t count_ = 0;
};

// Three durations per frame: `ui` is the wall time of building the frame (the views, ImGui),
// `cpu` the UI thread's CPU time for the same work (unaffected by other processes taking the
// cores), `total` the wall time including handing the frame to OpenGL and waiting for it to be
// drawn (glFinish in screenshot mode; with a software rasteriser such as Xvfb's llvmpipe that
// wait dominates).
struct FrameStats {
  FrameRing all{512};  // the latest frames' ui time, for the on-screen overlay
  struct Phase {
    FrameRing ui{1 << 16}, cpu{1 << 16}, total{1 << 16};
  } loading, loaded;
  // Loaded frames per view (index: ViewKind), for the per-view report.
  static constexpr std::size_t kViews = 8;
  std::vector<Phase> per_view = std::vector<Phase>(kViews);
  std::vector<std::string> view_names = std::vector<std::string>(kViews);
  // What the last loaded frame of each view handed to OpenGL: with a software rasteriser
  // (llvmpipe) the time goes into shading pixels, so `pixels` (triangle area, overdraw
  // included) is the number to keep down; `commands` are draw calls.
  struct DrawCounts {
    uint64_t vertices = 0, triangles = 0, commands = 0;
    double pixels = 0;
  };
  std::vector<DrawCounts> per_view_draw = std::vector<DrawCounts>(kViews);
  void add(double ui_ms, double cpu_ms, double total_ms, bool busy, std::size_t view = kViews) {
    all.add(ui_ms);
    Phase& p = busy ? loading : loaded;
    p.ui.add(ui_ms);
    p.cpu.add(cpu_ms);
    p.total.add(total_ms);
    if (!busy && view < kViews) {
      per_view[view].ui.add(ui_ms);
      per_view[view].cpu.add(cpu_ms);
      per_view[view].total.add(total_ms);
    }
  }
  // One line per phase and measure: "ui while loading: 240 frames, p50 3.1 ms, p95 ..., p99 ..."
  std::string report() const;
};

// Counts what ImGui's draw data for a frame hands to OpenGL: vertices, triangles, draw
// calls, and the area of the triangles inside their clip rectangles (an estimate of the
// pixels shaded, overdraw included; clipping is estimated from each triangle's bounding box).
FrameStats::DrawCounts count_draws(const ImDrawData* draw_data);

// CPU time of the calling thread, in ms.
double thread_cpu_ms();

}  // namespace memtide::viewer
