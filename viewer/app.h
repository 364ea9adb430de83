// The application: the loader, the views, menus, status line, file browser, settings and
// frame statistics. Independent of the window system: main.cpp owns GLFW and OpenGL and calls
// App::draw() once per frame between ImGui::NewFrame() and ImGui::Render().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "viewer/file_browser.h"
#include "viewer/frame_stats.h"
#include "viewer/loader.h"
#include "viewer/settings.h"
#include "viewer/views.h"

namespace memtide::viewer {

enum class ViewKind : uint8_t { Summary, Timeline, Flamegraph, Leaks, Tree, Compare, Growth, Sizes, Count_ };
const char* view_name(ViewKind v);  // "summary", "timeline", ... (command-line names)
std::optional<ViewKind> parse_view(const std::string& name);

struct AppOptions {
  std::string config_dir;   // "" : settings are neither read nor written
  bool remember = true;     // add opened files to the recent list
  Loader::Options loader;
  // The Leaks view hides the heap leaks these match (`--suppressions`; null: none).
  std::shared_ptr<const analysis::SuppressionList> suppressions;
};

class App {
 public:
  explicit App(AppOptions o);
  ~App();

  void open(const std::string& path);
  void open_baseline(const std::string& path);
  void select_view(ViewKind v) { requested_view_ = v; }
  ViewKind current_view() const { return view_; }
  void set_selection(TimeRange r);
  void set_domain(analysis::Domain d) { domain_ = d; }

  // One frame of UI (inside NewFrame/Render).
  void draw();

  // Fonts and style for the current scale and theme; call before NewFrame when
  // style_changed() says so (the font atlas must be rebuilt between frames).
  bool style_changed() const { return style_dirty_; }
  void apply_style();
  float scale() const { return settings_.scale > 0 ? settings_.scale : default_scale_; }
  void set_scale(float s);
  void set_dark(bool dark);
  void set_default_scale(float s) { default_scale_ = s; }

  bool quit_requested() const { return quit_; }
  // Everything the selected view needs is loaded and laid out (screenshot mode).
  bool complete() const;
  const Snapshot& snapshot() const { return *snap_; }
  Loader& loader() { return loader_; }

  FrameStats& stats() { return stats_; }
  FlamegraphView& flamegraph() { return flame_; }
  TreeView& tree() { return tree_; }
  LeaksView& leaks() { return leaks_; }
  CompareView& compare() { return compare_; }
  GrowthView& growth() { return growth_; }
  SizesView& sizes() { return sizes_; }
  void set_show_stats(bool on) { show_stats_ = on; }

 private:
  void menu_bar();
  void status_line();
  void save();

  AppOptions opt_;
  Settings settings_;
  float default_scale_ = 1;
  bool style_dirty_ = true;
  Loader loader_;
  std::shared_ptr<const Snapshot> snap_;
  std::string opening_;  // the file asked for, until its first snapshot arrives
  TimeRange selection_;
  TimeRange applied_selection_;
  analysis::Domain domain_ = analysis::Domain::Heap;
  ViewKind view_ = ViewKind::Summary;
  std::optional<ViewKind> requested_view_;
  SummaryView summary_;
  TimelineView timeline_, strip_;
  FlamegraphView flame_;
  LeaksView leaks_;
  TreeView tree_;
  CompareView compare_;
  GrowthView growth_;
  SizesView sizes_;
  FileBrowser browser_;
  enum class BrowseFor { Trace, Baseline } browse_for_ = BrowseFor::Trace;
  FrameStats stats_;
  bool show_stats_ = false;
  bool paused_ = false;
  bool quit_ = false;
};

}  // namespace memtide::viewer
