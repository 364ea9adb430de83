// Trees: the call tree top-down or bottom-up with self and total of every metric (columns
// sortable; hide or show them from the header's context menu), and the callers and callees
// of the selected function; of the heap, the anonymous mappings or the custom pools.
#include <imgui.h>

#include <algorithm>

#include "viewer/format.h"
#include "viewer/views.h"

namespace memtide::viewer {

using analysis::Metric;

namespace {

std::string cell(uint64_t v, Metric m) {
  if (v == 0) return {};
  return metric_is_bytes(m) ? format_bytes(v) : format_count(v);
}

constexpr ImGuiID kLabelColumn = 0;
ImGuiID column_id(unsigned metric, bool self) { return 1 + metric * 2 + (self ? 1 : 0); }

}  // namespace

void TreeView::rebuild_rows() {
  rows_.clear();
  if (!table_) return;
  // Depth-first over the expanded nodes, children in the sorted order.
  std::vector<std::pair<uint32_t, uint32_t>> todo;  // node, depth
  auto push_children = [&](uint32_t n, uint32_t depth) {
    const uint32_t count = static_cast<uint32_t>(table_->nodes[n].children.size());
    for (uint32_t k = count; k-- > 0;) todo.push_back({order_->children[order_->first[n] + k], depth});
  };
  push_children(0, 0);
  while (!todo.empty()) {
    const auto [n, depth] = todo.back();
    todo.pop_back();
    rows_.push_back({n, depth});
    if (expanded_[n]) push_children(n, depth + 1);
  }
  rows_dirty_ = false;
}

void TreeView::draw(Frame& f) {
  const Snapshot& s = f.snap;
  const float sc = f.scale;
  domain_combo(f);
  int dir = static_cast<int>(direction);
  ImGui::RadioButton("top-down", &dir, 0);
  ImGui::SameLine();
  ImGui::RadioButton("bottom-up (allocation sites first)", &dir, 1);
  direction = static_cast<Direction>(dir);
  ImGui::SameLine(0, 16 * sc);
  ImGui::TextDisabled("right-click a header to show more columns");
  const TreeTable* table = s.view ? s.view->table(f.domain, direction) : nullptr;
  if (!table) {
    ImGui::TextDisabled("building the call trees...");
    return;
  }
  table_ = table;
  if (table->serial != table_serial_) {
    table_serial_ = table->serial;
    expanded_.assign(table->nodes.size(), 0);
    order_dirty_ = rows_dirty_ = true;
    selected_ = 0;
  }

  const float rel_h = selected_label_.empty() ? 0 : std::max(140 * sc, ImGui::GetContentRegionAvail().y * 0.32f);
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX |
                                ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersOuter | ImGuiTableFlags_BordersV |
                                ImGuiTableFlags_Resizable | ImGuiTableFlags_Hideable | ImGuiTableFlags_Reorderable;
  const int columns = 1 + 2 * static_cast<int>(kMetricCount) + 1;
  if (ImGui::BeginTable("tree", columns, flags, ImVec2(0, -rel_h))) {
    ImGui::TableSetupScrollFreeze(1, 1);
    ImGui::TableSetupColumn("function", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_NoHide, 420 * sc,
                            kLabelColumn);
    for (unsigned m = 0; m < kMetricCount; ++m) {
      const auto mm = static_cast<Metric>(m);
      const bool rare = mm == Metric::Temporary || mm == Metric::LiveAt;
      char name[64];
      std::snprintf(name, sizeof name, "%s", metric_name(mm));
      ImGuiTableColumnFlags cf = ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_PreferSortDescending;
      if (mm == Metric::Allocated) cf |= ImGuiTableColumnFlags_DefaultSort;
      ImGui::TableSetupColumn(name, cf | (rare ? ImGuiTableColumnFlags_DefaultHide : 0), 100 * sc, column_id(m, false));
      std::snprintf(name, sizeof name, "%s (self)", metric_name(mm));
      ImGui::TableSetupColumn(name, ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_PreferSortDescending |
                                        (rare || mm == Metric::Count ? ImGuiTableColumnFlags_DefaultHide : 0),
                              100 * sc, column_id(m, true));
    }
    ImGui::TableSetupColumn("location", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_NoSort, 260 * sc);
    ImGui::TableHeadersRow();
    if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsDirty) {
      if (specs->SpecsCount > 0) {
        const ImGuiID id = specs->Specs[0].ColumnUserID;
        TreeSort ts;
        ts.by_label = id == kLabelColumn;
        if (!ts.by_label) {
          ts.metric = static_cast<Metric>((id - 1) / 2);
          ts.self = (id - 1) % 2 == 1;
        }
        ts.ascending = specs->Specs[0].SortDirection == ImGuiSortDirection_Ascending;
        if (!(ts == sort_)) order_dirty_ = true;
        sort_ = ts;
      }
      specs->SpecsDirty = false;
    }
    if (order_dirty_) {  // only when the table or the sort order changed
      if (sort_ == TreeSort{}) {
        order_ = &table->by_allocated;  // built by the loader
      } else {
        own_order_ = sort_tree(*table, sort_);
        order_ = &own_order_;
      }
      order_dirty_ = false;
      rows_dirty_ = true;
      if (std::all_of(expanded_.begin(), expanded_.end(), [](uint8_t e) { return e == 0; })) {
        // First look: open the heaviest path a few levels deep.
        uint32_t n = 0;
        for (int depth = 0; depth < 12 && !table->nodes[n].children.empty(); ++depth) {
          n = order_->children[order_->first[n]];
          expanded_[n] = 1;
        }
      }
    }
    if (rows_dirty_) rebuild_rows();

    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(rows_.size()));
    const float indent = ImGui::GetTreeNodeToLabelSpacing() * 0.7f;
    while (clip.Step())
      for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
        const Row row = rows_[static_cast<std::size_t>(i)];
        const TableNode& n = table->nodes[row.node];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::SetCursorPosX(ImGui::GetCursorPosX() + static_cast<float>(row.depth) * indent);
        ImGuiTreeNodeFlags tf = ImGuiTreeNodeFlags_NoTreePushOnOpen | ImGuiTreeNodeFlags_SpanFullWidth |
                                ImGuiTreeNodeFlags_OpenOnArrow | ImGuiTreeNodeFlags_OpenOnDoubleClick;
        if (n.children.empty()) tf |= ImGuiTreeNodeFlags_Leaf;
        if (row.node == selected_) tf |= ImGuiTreeNodeFlags_Selected;
        ImGui::SetNextItemOpen(expanded_[row.node] != 0);
        const bool open = ImGui::TreeNodeEx(reinterpret_cast<void*>(static_cast<uintptr_t>(row.node)), tf, "%.*s",
                                            static_cast<int>(n.label.size()), n.label.data());
        if (open != (expanded_[row.node] != 0)) {
          expanded_[row.node] = open;
          rows_dirty_ = true;
        }
        if (ImGui::IsItemClicked() && !ImGui::IsItemToggledOpen() && selected_ != row.node) {
          selected_ = row.node;
          selected_label_ = std::string(n.label);
        }
        for (unsigned m = 0; m < kMetricCount; ++m) {
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(cell(n.total[m], static_cast<Metric>(m)).c_str());
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(cell(n.self[m], static_cast<Metric>(m)).c_str());
        }
        ImGui::TableNextColumn();
        if (!n.file.empty())
          ImGui::TextDisabled("%s:%u", std::string(analysis::basename_of(n.file)).c_str(), n.line);
        else
          ImGui::TextDisabled("%s", std::string(analysis::basename_of(n.module)).c_str());
      }
    ImGui::EndTable();
  }

  if (selected_label_.empty()) return;
  // Callers and callees, from the top-down table; recomputed when the function, the metric
  // or the data change.
  const TreeTable* top = s.view->table(f.domain, Direction::TopDown);
  if (!top) return;
  if (!relatives_ || relatives_->function != selected_label_ || relatives_serial_ != top->serial) {
    relatives_ = function_relatives(*top, selected_label_, relatives_metric);
    relatives_serial_ = top->serial;
  }
  const FunctionRelatives& r = *relatives_;
  const unsigned mi = static_cast<unsigned>(relatives_metric);
  ImGui::Text("%s", r.function.c_str());
  ImGui::SameLine(0, 16 * sc);
  ImGui::TextDisabled("total %s, self %s", cell(r.total[mi], relatives_metric).c_str(), cell(r.self[mi], relatives_metric).c_str());
  ImGui::SameLine(0, 16 * sc);
  ImGui::SetNextItemWidth(180 * sc);
  if (ImGui::BeginCombo("##relmetric", metric_name(relatives_metric))) {
    for (unsigned m = 0; m < kMetricCount; ++m)
      if (ImGui::Selectable(metric_name(static_cast<Metric>(m)), m == mi)) {
        relatives_metric = static_cast<Metric>(m);
        relatives_.reset();  // re-sorted by the new metric next frame
      }
    ImGui::EndCombo();
  }
  std::string jump;
  auto list = [&](const char* id, const char* title, const std::vector<Relative>& v, float width) {
    if (!ImGui::BeginTable(id, 2, ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersOuter,
                           ImVec2(width, 0)))
      return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn(title, ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn(metric_name(relatives_metric), ImGuiTableColumnFlags_WidthFixed, 100 * sc);
    ImGui::TableHeadersRow();
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(v.size()));
    while (clip.Step())
      for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
        const Relative& x = v[static_cast<std::size_t>(i)];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::PushID(i);
        if (ImGui::Selectable(x.label.c_str(), false, ImGuiSelectableFlags_AllowDoubleClick) && ImGui::IsMouseDoubleClicked(0))
          jump = x.label;
        ImGui::PopID();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(cell(x.value[mi], relatives_metric).c_str());
      }
    ImGui::EndTable();
  };
  const float half = ImGui::GetContentRegionAvail().x * 0.5f - 4 * sc;
  list("callers", "callers (double-click to follow)", r.callers, half);
  ImGui::SameLine();
  list("callees", "callees", r.callees, half);
  if (!jump.empty() && jump != "(root)") selected_label_ = jump;
}

}  // namespace memtide::viewer
