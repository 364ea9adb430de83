// The views. Each keeps its own interaction state (zoom, search, sort, selection) and the
// results derived from it (layouts, sorted row orders), recomputed only when what they depend
// on changes; draw() itself only draws. One file per view: view_<name>.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <imgui.h>

#include "viewer/histogram_model.h"
#include "viewer/snapshot.h"

namespace memtide::viewer {

class Loader;

// What every view may use during a frame.
struct Frame {
  const Snapshot& snap;
  Loader& loader;
  bool dark = true;
  float scale = 1;
  // The selected time range (shared by all views; the timeline changes it).
  TimeRange& selection;
  // Whose blocks the flamegraph and the leaks show: heap, anonymous mappings or custom pools
  // (shared by both views).
  analysis::Domain& domain;
};

// The domain selector of the flamegraph and leaks toolbars, drawn only when the trace has
// anonymous mappings or custom-pool blocks (then followed by SameLine). True when changed.
bool domain_combo(Frame& f);
// Puts the next toolbar item, `width` pixels wide, on the same line after `spacing` when it
// fits in the window, else starts a new line: a toolbar never runs off the window's edge.
void toolbar_next(float width, float spacing);
const char* domain_title(analysis::Domain d);  // "heap", "anonymous mappings", "custom pools"

// Colours of the current theme for what ImGui's style does not cover.
struct Palette {
  uint32_t heap, heap_fill, rss, peak, marker, selection, grid, text_dim, warn, live, merged, search, dim_overlay;
  uint32_t mapped, custom;  // the timeline's lines of anonymous mappings and custom pools
};
const Palette& palette(bool dark);

// ---------------------------------------------------------------------------------------

class SummaryView {
 public:
  void draw(Frame& f);
};

class TimelineView {
 public:
  // The full view (with legend and markers), or the compact strip above the other views.
  void draw(Frame& f, float height, bool compact);
  TimeRange view_range() const { return view_; }
  // For tests: the plot's rectangle in screen pixels at the last draw.
  float plot_x0() const { return plot_[0]; }
  float plot_x1() const { return plot_[2]; }
  float plot_y() const { return (plot_[1] + plot_[3]) / 2; }
  void reset() { view_ = {}; cache_key_ = {}; }

 private:
  void update_columns(const TimelineData& d, int width, int height, float marker_px);
  TimeRange view_{};  // empty: the whole trace
  struct Key {
    uint64_t data = 0;  // TimelineData::serial
    TimeRange view;
    int width = 0, height = 0;
    float marker_px = 0;
    bool operator==(const Key&) const = default;
  } cache_key_;
  // The series drawn as lines through their column maxima: RSS, mapped bytes, custom pools.
  static constexpr int kLines = 3;
  std::vector<Column> heap_cols_, line_cols_[kLines];
  std::vector<PixelRun> line_runs_, series_runs_[kLines];  // rows from the plot's top
  std::vector<std::vector<EdgePoint>> fill_edges_;          // the heap's area, simplified
  std::vector<ImVec2> line_points_;                          // reused by draw()
  std::vector<std::size_t> markers_;
  std::optional<uint64_t> drag_from_;  // selection drag in progress (time at press)
  float plot_[4] = {};
  bool panning_ = false;
  float pan_last_x_ = 0;
};

// The flamegraph widget, shared by the Flamegraph and Compare views.
class FlameWidget {
 public:
  void draw(Frame& f, const FlameTree* tree, bool bytes, const char* id);
  std::string search;  // edited by the owning view's toolbar
  const FlameSearch& search_result() const { return search_; }
  // For tests: the zoomed frame, the current layout, and where the graph was drawn.
  uint32_t zoom() const { return zoom_; }
  const FlameLayout& layout() const { return layout_; }
  float graph_x() const { return graph_x_; }
  float graph_y() const { return graph_y_; }
  float row_height() const { return row_h_; }
  void reset_zoom() {
    zoom_path_.clear();
    zoom_ = 0;
    dirty_ = true;
  }

 private:
  void sync(const FlameTree* tree, float width, float min_px);
  uint64_t tree_serial_ = 0;
  std::vector<std::string> zoom_path_;  // labels from the root's child to the zoomed frame
  uint32_t zoom_ = 0;
  float width_ = 0, min_px_ = 0;
  float graph_x_ = 0, graph_y_ = 0, row_h_ = 0;
  FlameLayout layout_;
  FlameSearch search_;
  bool dirty_ = true;
};

class FlamegraphView {
 public:
  void draw(Frame& f);
  analysis::Metric metric = analysis::Metric::Allocated;
  Direction direction = Direction::TopDown;
  FlameWidget widget;
};

class LeaksView {
 public:
  void draw(Frame& f);
  std::string filter;
  // The heap's leaks that these match are hidden, and counted apart (null: none).
  std::shared_ptr<const analysis::SuppressionList> suppressions;
  bool show_suppressed = false;  // listed all the same, marked
  // For tests: the rows listed at the last draw (indices into the data's rows), and what the
  // suppressions matched in that data.
  const std::vector<uint32_t>& order() const { return order_; }
  const LeakSuppression& suppressed() const { return suppressed_; }

 private:
  uint64_t data_serial_ = 0;
  const analysis::SuppressionList* applied_suppressions_ = nullptr;
  LeakSuppression suppressed_;  // of the data and suppressions above (heap only)
  bool applied_show_suppressed_ = false;
  std::string applied_filter_;
  LeakColumn column_ = LeakColumn::Bytes;
  bool ascending_ = false;
  bool hide_reachable_ = false;
  bool dirty_ = true;
  std::vector<uint32_t> order_;
  int selected_ = -1;  // row index into data_->rows
  std::size_t frame_ = 0;  // frame chosen for the suppression
  std::string copied_;
};

class TreeView {
 public:
  void draw(Frame& f);
  Direction direction = Direction::TopDown;
  analysis::Metric relatives_metric = analysis::Metric::Allocated;

 private:
  void rebuild_rows();
  const TreeTable* table_ = nullptr;  // this frame's table
  uint64_t table_serial_ = 0;
  TreeSort sort_;
  TreeOrder own_order_;                // when sorted by something else than the default
  const TreeOrder* order_ = nullptr;   // the table's default order or own_order_
  std::vector<uint8_t> expanded_;
  struct Row {
    uint32_t node;
    uint32_t depth;
  };
  std::vector<Row> rows_;
  bool rows_dirty_ = true, order_dirty_ = true;
  uint32_t selected_ = 0;
  std::string selected_label_;
  std::optional<FunctionRelatives> relatives_;
  uint64_t relatives_serial_ = 0;
};

// The Growth view (view_growth.cpp); `go` asks the app for another view of a stack.
class GrowthView {
 public:
  void draw(Frame& f);
  enum class GoTo : uint8_t { None, Flamegraph, Leaks };
  struct Go {
    GoTo to = GoTo::None;
    std::string site;  // the stack's allocation site: the flamegraph's search, the leaks' filter
  } go;
  int selected() const { return selected_; }
  // For tests: the centre of row `layer`'s flamegraph (or leaks) button at the last draw.
  ImVec2 button(std::size_t layer, bool leaks) const {
    return layer < buttons_.size() ? buttons_[layer][leaks ? 1 : 0] : ImVec2(-1, -1);
  }

 private:
  uint64_t serial_ = 0;
  int selected_ = -1;  // layer
  std::vector<std::array<ImVec2, 2>> buttons_;
};

// The Sizes view (view_sizes.cpp): the heap allocations by size class, of the selected range. It
// reads the histogram of the shown trace (HistogramJob) when first drawn.
class SizesView {
 public:
  void draw(Frame& f);
  // The histogram of the snapshot's trace for `selection` is made (or nothing is loaded).
  bool complete(const Snapshot& s, TimeRange selection) const;
  // For tests: the centre of class i's bars at the last draw ((-1, -1) when not drawn), and
  // the class under the pointer (-1: none).
  ImVec2 bar(std::size_t i) const { return i < bars_.size() ? bars_[i] : ImVec2(-1, -1); }
  int hovered() const { return hovered_; }
  const std::string& tooltip() const { return tooltip_; }  // shown at the last draw ("": none)
  const HistogramJob& job() const { return job_; }

 private:
  static uint64_t key(const Snapshot& s, TimeRange window);
  HistogramJob job_;
  std::vector<ImVec2> bars_;
  int hovered_ = -1;
  std::string tooltip_;
};

class CompareView {
 public:
  void draw(Frame& f);
  analysis::Metric metric = analysis::Metric::Allocated;
  bool shape_of_before = false;
  FlameWidget widget;
  // Set by the view when the user asks for a file; the app opens its file browser.
  bool want_browse = false;

 private:
  uint64_t rows_key_ = 0;  // CompareData::serial * metrics + metric
  std::string filter_, applied_filter_;
  DiffColumn column_ = DiffColumn::Delta;
  bool ascending_ = false, dirty_ = true;
  std::vector<uint32_t> order_;
};

}  // namespace memtide::viewer
