// Sections: [1] view names, palette  [2] style, fonts, settings  [3] frame: menus, status
//           line, selection, tabs
#include "viewer/app.h"

#include <time.h>

#include <imgui.h>

#include <cmath>
#include <filesystem>

#include "viewer/format.h"

namespace memtide::viewer {

// ---------------------------------------------------------------------------------------
// [1] View names, palette
// ---------------------------------------------------------------------------------------

const char* view_name(ViewKind v) {
  switch (v) {
    case ViewKind::Summary: return "summary";
    case ViewKind::Timeline: return "timeline";
    case ViewKind::Flamegraph: return "flamegraph";
    case ViewKind::Leaks: return "leaks";
    case ViewKind::Tree: return "tree";
    case ViewKind::Compare: return "compare";
    case ViewKind::Growth: return "growth";
    case ViewKind::Sizes: return "sizes";
    case ViewKind::Count_: break;
  }
  return "?";
}

std::optional<ViewKind> parse_view(const std::string& name) {
  for (unsigned i = 0; i < static_cast<unsigned>(ViewKind::Count_); ++i)
    if (name == view_name(static_cast<ViewKind>(i))) return static_cast<ViewKind>(i);
  if (name == "trees") return ViewKind::Tree;
  if (name == "histogram") return ViewKind::Sizes;
  return std::nullopt;
}

const Palette& palette(bool dark) {
  static const Palette kDark{
      IM_COL32(86, 180, 250, 255),  IM_COL32(86, 180, 250, 70),  IM_COL32(250, 170, 60, 255),
      IM_COL32(255, 80, 80, 255),   IM_COL32(190, 150, 255, 255), IM_COL32(255, 255, 255, 40),
      IM_COL32(255, 255, 255, 28),  IM_COL32(160, 160, 170, 255), IM_COL32(255, 120, 90, 255),
      IM_COL32(60, 220, 110, 255),  IM_COL32(110, 110, 120, 255), IM_COL32(255, 0, 200, 255),
      IM_COL32(20, 20, 24, 150),    IM_COL32(70, 215, 215, 255),  IM_COL32(235, 225, 90, 255)};
  static const Palette kLight{
      IM_COL32(20, 110, 200, 255),  IM_COL32(20, 110, 200, 60),  IM_COL32(210, 110, 0, 255),
      IM_COL32(210, 30, 30, 255),   IM_COL32(120, 60, 200, 255), IM_COL32(0, 60, 160, 40),
      IM_COL32(0, 0, 0, 30),        IM_COL32(100, 100, 110, 255), IM_COL32(200, 60, 20, 255),
      IM_COL32(0, 150, 60, 255),    IM_COL32(170, 170, 175, 255), IM_COL32(220, 0, 170, 255),
      IM_COL32(255, 255, 255, 150), IM_COL32(0, 135, 145, 255),   IM_COL32(150, 130, 0, 255)};
  return dark ? kDark : kLight;
}

const char* domain_title(analysis::Domain d) {
  switch (d) {
    case analysis::Domain::Heap: return "heap";
    case analysis::Domain::Mmap: return "anonymous mappings";
    case analysis::Domain::Custom: return "custom pools";
    case analysis::Domain::Count: break;
  }
  return "?";
}

void toolbar_next(float width, float spacing) {
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  if (ImGui::GetItemRectMax().x + spacing + width <= right) ImGui::SameLine(0, spacing);
}

bool domain_combo(Frame& f) {
  const analysis::Model* m = f.snap.base.get();
  if (!m) return false;
  auto present = [&](analysis::Domain d) {
    const analysis::Totals& t = m->totals[static_cast<unsigned>(d)];
    return t.allocations != 0 || t.frees != 0;
  };
  if (f.domain == analysis::Domain::Heap && !present(analysis::Domain::Mmap) && !present(analysis::Domain::Custom))
    return false;  // a heap-only trace: nothing to choose
  bool changed = false;
  ImGui::SetNextItemWidth(ImGui::CalcTextSize("anonymous mappings").x + ImGui::GetFrameHeight() + 12 * f.scale);
  if (ImGui::BeginCombo("##domain", domain_title(f.domain))) {
    for (unsigned i = 0; i < analysis::kDomainCount; ++i) {
      const auto d = static_cast<analysis::Domain>(i);
      const bool enabled = d == analysis::Domain::Heap || present(d);
      if (ImGui::Selectable(domain_title(d), d == f.domain, enabled ? 0 : ImGuiSelectableFlags_Disabled)) {
        changed = d != f.domain;
        f.domain = d;
      }
      if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip("%s%s",
                          d == analysis::Domain::Heap ? "malloc, new and the rest of the C and C++ heap"
                          : d == analysis::Domain::Mmap ? "anonymous mmap / munmap / mremap, counted apart from the heap"
                                                        : "blocks announced with memtide_alloc / memtide_free",
                          enabled ? "" : " (none in this trace)");
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine(0, 16 * f.scale);
  return changed;
}

// ---------------------------------------------------------------------------------------
// [2] Style, fonts, settings
// ---------------------------------------------------------------------------------------

App::App(AppOptions o) : opt_(std::move(o)), loader_(opt_.loader), snap_(loader_.snapshot()) {
  if (!opt_.config_dir.empty()) settings_ = load_settings(opt_.config_dir);
  leaks_.suppressions = opt_.suppressions;
}

App::~App() = default;

void App::save() {
  if (!opt_.config_dir.empty()) save_settings(opt_.config_dir, settings_);
}

void App::set_scale(float s) {
  settings_.scale = std::clamp(s, 0.5f, 4.0f);
  style_dirty_ = true;
  save();
}

void App::set_dark(bool dark) {
  settings_.dark = dark;
  style_dirty_ = true;
  save();
}

void App::apply_style() {
  const float s = settings_.scale > 0 ? settings_.scale : default_scale_;
  ImGuiStyle style;
  if (settings_.dark) {
    ImGui::StyleColorsDark(&style);
  } else {
    ImGui::StyleColorsLight(&style);
  }
  style.WindowRounding = 0;
  style.FrameRounding = 3;
  style.TabRounding = 3;
  style.ScaleAllSizes(s);
  ImGui::GetStyle() = style;

  ImGuiIO& io = ImGui::GetIO();
  io.Fonts->Clear();
  const float px = std::round(15.0f * s);
  const char* const candidates[] = {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                                    "/usr/share/fonts/TTF/DejaVuSans.ttf"};
  ImFont* font = nullptr;
  for (const char* path : candidates) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
      font = io.Fonts->AddFontFromFileTTF(path, px);
      if (font) break;
    }
  }
  if (!font) {  // ImGui's own bitmap font, at a whole multiple of its size so it stays sharp
    ImFontConfig cfg;
    cfg.SizePixels = 13.0f * std::max(1.0f, std::round(s));
    io.Fonts->AddFontDefault(&cfg);
  }
  io.Fonts->Build();
  style_dirty_ = false;
}

void App::open(const std::string& path) {
  loader_.open(path);
  opening_ = path;
  selection_ = applied_selection_ = {};
  timeline_.reset();
  strip_.reset();
  flame_.widget.reset_zoom();
  if (opt_.remember) {
    add_recent(settings_.recent, path);
    save();
  }
}

void App::open_baseline(const std::string& path) {
  loader_.open_baseline(path);
  compare_.widget.reset_zoom();
  requested_view_ = ViewKind::Compare;
}

void App::set_selection(TimeRange r) { selection_ = r; }

bool App::complete() const {
  const Snapshot& s = *snap_;
  if (!loader_.idle()) return false;
  if (!s.error.empty()) return true;
  if (!s.loaded() || !s.view || !s.view->complete) return false;
  if (s.compare && !s.compare->complete && s.compare->error.empty()) return false;
  if (requested_view_.value_or(view_) == ViewKind::Sizes && !sizes_.complete(s, selection_)) return false;
  return true;
}

// ---------------------------------------------------------------------------------------
// [3] Frame
// ---------------------------------------------------------------------------------------

void App::menu_bar() {
  if (!ImGui::BeginMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open trace...")) {
      browse_for_ = BrowseFor::Trace;
      browser_.open("Open trace", {});
    }
    if (ImGui::BeginMenu("Open recent", !settings_.recent.empty())) {
      std::string pick;
      for (const std::string& r : settings_.recent)
        if (ImGui::MenuItem(r.c_str())) pick = r;
      ImGui::EndMenu();
      if (!pick.empty()) open(pick);
    }
    ImGui::Separator();
    if (ImGui::MenuItem("Compare with baseline...", nullptr, false, snap_->loaded())) {
      browse_for_ = BrowseFor::Baseline;
      browser_.open("Open baseline trace", {});
    }
    if (ImGui::MenuItem("Close baseline", nullptr, false, snap_->compare != nullptr)) loader_.close_baseline();
    ImGui::Separator();
    if (ImGui::MenuItem("Quit", "Ctrl+Q")) quit_ = true;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    if (ImGui::MenuItem("Dark theme", nullptr, settings_.dark)) set_dark(true);
    if (ImGui::MenuItem("Light theme", nullptr, !settings_.dark)) set_dark(false);
    ImGui::Separator();
    for (float s : {1.0f, 1.25f, 1.5f, 2.0f, 2.5f, 3.0f}) {
      char label[32];
      std::snprintf(label, sizeof label, "Scale %.0f %%", s * 100);
      if (ImGui::MenuItem(label, nullptr, std::abs(scale() - s) < 0.01f)) set_scale(s);
    }
    ImGui::Separator();
    ImGui::MenuItem("Frame times", nullptr, &show_stats_);
    ImGui::EndMenu();
  }
  if (snap_->live || paused_) {
    if (ImGui::MenuItem(paused_ ? "Resume live" : "Pause live")) {
      paused_ = !paused_;
      loader_.set_paused(paused_);
    }
  }
  ImGui::EndMenuBar();
}

void App::status_line() {
  const Snapshot& s = *snap_;
  const Palette& pal = palette(settings_.dark);
  if (s.live || paused_) {
    // A dot that pulses while following; steady when paused.
    const float t = static_cast<float>(ImGui::GetTime());
    const float a = paused_ ? 1.0f : 0.55f + 0.45f * std::sin(t * 5.0f);
    ImVec4 c = ImGui::ColorConvertU32ToFloat4(pal.live);
    c.w = a;
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float r = ImGui::GetTextLineHeight() * 0.32f;
    ImGui::GetWindowDrawList()->AddCircleFilled(ImVec2(p.x + r, p.y + ImGui::GetTextLineHeight() * 0.5f), r,
                                                ImGui::ColorConvertFloat4ToU32(c));
    ImGui::Dummy(ImVec2(r * 2.4f, ImGui::GetTextLineHeight()));
    ImGui::SameLine(0, 0);
    ImGui::TextColored(c, paused_ ? "PAUSED" : "LIVE");
    ImGui::SameLine();
    // How far the view is behind the recording: the age of its newest event (the trace's times
    // are this machine's CLOCK_MONOTONIC).
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const uint64_t now_ns = static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
    const uint64_t newest = s.base ? s.base->last_time : 0;
    const double behind = newest && now_ns > newest ? static_cast<double>(now_ns - newest) / 1e9 : 0;
    ImGui::TextDisabled("(%llu refreshes, last took %.2f s, read %s; newest event %.1f s ago)",
                        static_cast<unsigned long long>(s.refreshes), s.analysis_seconds,
                        format_bytes(s.refresh_bytes).c_str(), behind);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("The recorder is still writing this file: the views follow it");
    ImGui::SameLine();
  }
  if (s.summary) {
    ImGui::TextUnformatted(s.summary->title.c_str());
    ImGui::SameLine();
    if (!s.summary->sampling_badge.empty()) {
      // The badge: every figure of the views is an estimate.
      ImGui::PushStyleColor(ImGuiCol_Button, ImVec4(0.75f, 0.45f, 0.05f, 1.0f));
      ImGui::PushStyleColor(ImGuiCol_ButtonHovered, ImVec4(0.85f, 0.55f, 0.10f, 1.0f));
      ImGui::SmallButton(s.summary->sampling_badge.c_str());
      ImGui::PopStyleColor(2);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", s.summary->sampling_note.c_str());
      ImGui::SameLine();
    }
    ImGui::TextDisabled("%s", s.path.c_str());
  } else if (!s.path.empty()) {
    ImGui::TextDisabled("%s", s.path.c_str());
  }
  const LoaderProgress p = loader_.progress();
  if (p.busy) {
    ImGui::SameLine();
    const float w = 220 * scale();
    ImGui::SetCursorPosX(std::max(ImGui::GetCursorPosX(), ImGui::GetWindowContentRegionMax().x - w));
    if (p.fraction >= 0) {
      ImGui::ProgressBar(p.fraction, ImVec2(w, 0), p.phase.c_str());
    } else {
      ImGui::TextDisabled("%s...", p.phase.c_str());
    }
  }
  if (show_stats_) {
    ImGui::TextDisabled("frame %.2f ms   p50 %.2f ms   p95 %.2f ms   p99 %.2f ms   (%llu frames)", stats_.all.last(),
                        stats_.all.percentile(50), stats_.all.percentile(95), stats_.all.percentile(99),
                        static_cast<unsigned long long>(stats_.all.total()));
  }
}

void App::draw() {
  if (auto next = loader_.snapshot(); next != snap_) {
    loader_.retire(std::move(snap_));
    snap_ = std::move(next);
  }
  if (ImGui::GetIO().KeyCtrl && ImGui::IsKeyPressed('Q')  /* GLFW key codes are ASCII for letters */) quit_ = true;
  // Call trees are built when first needed (cheap to repeat: the loader ignores known wants).
  loader_.want_metric(flame_.metric);
  if (domain_ != analysis::Domain::Heap) loader_.want_domain(domain_);
  if (view_ == ViewKind::Tree) loader_.want_tables();
  if (view_ == ViewKind::Compare) loader_.want_metric(compare_.metric);
  if (applied_selection_ != selection_) {
    applied_selection_ = selection_;
    loader_.set_window(selection_);
  }

  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(vp->WorkPos);
  ImGui::SetNextWindowSize(vp->WorkSize);
  // No background: the frame is cleared to the window colour (platform.cpp) and a software
  // rasteriser pays for every pixel of a full-window quad drawn over it.
  ImGui::Begin("memtide", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_MenuBar |
                   ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBackground);
  menu_bar();
  status_line();
  Frame f{*snap_, loader_, settings_.dark, scale(), selection_, domain_};
  const Snapshot& s = *snap_;

  if (!s.error.empty()) {
    ImGui::Spacing();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette(settings_.dark).warn), "Cannot open %s: %s",
                       s.path.c_str(), s.error.c_str());
  }
  const LoaderProgress progress = loader_.progress();
  // (A snapshot with the timeline only comes first: the file is still being opened.)
  if (!opening_.empty() && s.path == opening_ && (s.loaded() || !s.error.empty())) opening_.clear();
  if (!s.loaded() && !opening_.empty()) {
    // The first analysis of a file: a large progress bar in the middle of the window, or at
    // the top above the whole run's timeline once it is read (loader.h).
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float w = std::min(avail.x * 0.6f, 640 * scale());
    const bool early = s.path == opening_ && s.timeline;
    ImGui::SetCursorPos(ImVec2((ImGui::GetWindowWidth() - w) * 0.5f,
                               ImGui::GetCursorPosY() + (early ? 8 * scale() : avail.y * 0.4f)));
    ImGui::BeginGroup();
    ImGui::TextUnformatted(("Opening " + opening_).c_str());
    char label[96];
    if (progress.busy && progress.fraction >= 0)
      std::snprintf(label, sizeof label, "%s  %.0f %%", progress.phase.c_str(), progress.fraction * 100.0f);
    else
      std::snprintf(label, sizeof label, "%s", progress.busy ? progress.phase.c_str() : "starting");
    ImGui::ProgressBar(progress.fraction >= 0 ? progress.fraction : 0.0f, ImVec2(w, 0), label);
    ImGui::EndGroup();
    if (early) {
      ImGui::Spacing();
      timeline_.draw(f, ImGui::GetContentRegionAvail().y, false);
    }
  } else if (!s.loaded()) {
    ImGui::Spacing();
    if (s.path.empty() || !s.error.empty()) {
      ImGui::TextWrapped("Open a trace with File > Open, by dropping a .mtide file on this window, or from the list:");
      for (const std::string& r : settings_.recent)
        if (ImGui::Selectable(r.c_str())) open(r);
    }
  } else {
    if (view_ != ViewKind::Timeline) strip_.draw(f, 90 * scale(), true);
    if (!selection_.empty()) {
      ImGui::TextDisabled("Selection %s .. %s: views show allocations made in it (leaks: not freed by its end)",
                          format_duration(selection_.from).c_str(), format_duration(selection_.to).c_str());
      ImGui::SameLine();
      if (ImGui::SmallButton("Clear selection")) selection_ = {};
      if (s.view && s.view->window != selection_) {
        ImGui::SameLine();
        ImGui::TextDisabled("(analysing...)");
      }
    }
    if (ImGui::BeginTabBar("views")) {
      for (unsigned i = 0; i < static_cast<unsigned>(ViewKind::Count_); ++i) {
        const auto v = static_cast<ViewKind>(i);
        static const char* const titles[] = {"Summary", "Timeline", "Flamegraph", "Leaks", "Trees", "Compare", "Growth", "Sizes"};
        const ImGuiTabItemFlags flags = requested_view_ == v ? ImGuiTabItemFlags_SetSelected : 0;
        if (ImGui::BeginTabItem(titles[i], nullptr, flags)) {
          view_ = v;
          ImGui::BeginChild("view", ImVec2(0, 0), false);
          switch (v) {
            case ViewKind::Summary: summary_.draw(f); break;
            case ViewKind::Timeline: timeline_.draw(f, ImGui::GetContentRegionAvail().y, false); break;
            case ViewKind::Flamegraph: flame_.draw(f); break;
            case ViewKind::Leaks: leaks_.draw(f); break;
            case ViewKind::Tree: tree_.draw(f); break;
            case ViewKind::Compare: compare_.draw(f); break;
            case ViewKind::Growth: growth_.draw(f); break;
            case ViewKind::Sizes: sizes_.draw(f); break;
            case ViewKind::Count_: break;
          }
          ImGui::EndChild();
          ImGui::EndTabItem();
        }
      }
      requested_view_.reset();
      ImGui::EndTabBar();
    }
    if (growth_.go.to != GrowthView::GoTo::None) {  // a stack's flamegraph or leaks, from the Growth view
      if (growth_.go.to == GrowthView::GoTo::Flamegraph) {
        flame_.metric = analysis::Metric::Leaked;
        flame_.widget.search = growth_.go.site;
        requested_view_ = ViewKind::Flamegraph;
      } else {
        leaks_.filter = growth_.go.site;
        requested_view_ = ViewKind::Leaks;
      }
      domain_ = analysis::Domain::Heap;
      growth_.go = {};
    }
    if (compare_.want_browse) {
      compare_.want_browse = false;
      browse_for_ = BrowseFor::Baseline;
      browser_.open("Open baseline trace", {});
    }
  }
  if (auto chosen = browser_.draw(scale())) {
    if (browse_for_ == BrowseFor::Trace)
      open(*chosen);
    else
      open_baseline(*chosen);
  }
  ImGui::End();
}

}  // namespace memtide::viewer
