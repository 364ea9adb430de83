#include "viewer/file_browser.h"

#include <imgui.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "viewer/format.h"

namespace memtide::viewer {

namespace fs = std::filesystem;

std::vector<DirEntry> list_directory(const std::string& dir, bool hidden, std::string& error) {
  std::vector<DirEntry> out;
  error.clear();
  std::error_code ec;
  fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    error = ec.message();
    return out;
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    DirEntry e;
    e.name = it->path().filename().string();
    if (!hidden && !e.name.empty() && e.name[0] == '.') continue;
    std::error_code ec2;
    e.is_dir = it->is_directory(ec2);
    if (!e.is_dir) e.size = it->file_size(ec2);
    e.is_trace = !e.is_dir && e.name.size() > 6 && e.name.ends_with(".mtide");
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) {
    if (a.is_dir != b.is_dir) return a.is_dir;
    return a.name < b.name;
  });
  return out;
}

void FileBrowser::open(const std::string& title, const std::string& start_dir) {
  title_ = title;
  open_ = true;
  popup_pending_ = true;
  std::error_code ec;
  change_dir(start_dir.empty() ? fs::current_path(ec).string() : start_dir);
}

void FileBrowser::change_dir(const std::string& dir) {
  std::error_code ec;
  dir_ = fs::weakly_canonical(dir, ec).string();
  if (ec || dir_.empty()) dir_ = dir;
  entries_ = list_directory(dir_, hidden_, error_);
  selected_ = -1;
  std::snprintf(path_, sizeof path_, "%s/", dir_ == "/" ? "" : dir_.c_str());
}

std::optional<std::string> FileBrowser::draw(float scale) {
  if (!open_) return std::nullopt;
  const std::string id = title_ + "##browser";
  if (popup_pending_) {
    ImGui::OpenPopup(id.c_str());
    popup_pending_ = false;
  }
  std::optional<std::string> chosen;
  ImGui::SetNextWindowSize(ImVec2(720 * scale, 480 * scale), ImGuiCond_Appearing);
  bool keep = true;
  if (ImGui::BeginPopupModal(id.c_str(), &keep)) {
    if (ImGui::Button("Up")) change_dir(fs::path(dir_).parent_path().string());
    ImGui::SameLine();
    if (ImGui::Checkbox("hidden files", &hidden_)) change_dir(dir_);
    ImGui::SameLine();
    ImGui::TextDisabled("%s", dir_.c_str());
    const float footer = ImGui::GetFrameHeightWithSpacing() * 1.3f;
    if (ImGui::BeginTable("entries", 2,
                          ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersOuter,
                          ImVec2(0, -footer))) {
      ImGui::TableSetupScrollFreeze(0, 1);
      ImGui::TableSetupColumn("name", ImGuiTableColumnFlags_WidthStretch);
      ImGui::TableSetupColumn("size", ImGuiTableColumnFlags_WidthFixed, 90 * scale);
      ImGui::TableHeadersRow();
      std::string go_into;
      ImGuiListClipper clip;
      clip.Begin(static_cast<int>(entries_.size()));
      while (clip.Step())
        for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
          const DirEntry& e = entries_[static_cast<std::size_t>(i)];
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          if (e.is_trace) ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_PlotLinesHovered));
          const std::string label = (e.is_dir ? e.name + "/" : e.name) + "##" + std::to_string(i);
          if (ImGui::Selectable(label.c_str(), selected_ == i,
                                ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowDoubleClick)) {
            selected_ = i;
            if (e.is_dir) {
              if (ImGui::IsMouseDoubleClicked(0)) go_into = e.name;
            } else {
              std::snprintf(path_, sizeof path_, "%s/%s", dir_ == "/" ? "" : dir_.c_str(), e.name.c_str());
              if (ImGui::IsMouseDoubleClicked(0)) chosen = path_;
            }
          }
          if (e.is_trace) ImGui::PopStyleColor();
          ImGui::TableNextColumn();
          if (!e.is_dir) ImGui::TextUnformatted(format_bytes(e.size).c_str());
        }
      ImGui::EndTable();
      if (!go_into.empty()) change_dir(dir_ + "/" + go_into);
    }
    if (!error_.empty()) ImGui::TextColored(ImVec4(1, 0.4f, 0.3f, 1), "%s", error_.c_str());
    ImGui::SetNextItemWidth(-160 * scale);
    const bool enter = ImGui::InputText("##path", path_, sizeof path_, ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    const bool ok = ImGui::Button("Open", ImVec2(70 * scale, 0));
    ImGui::SameLine();
    if (ImGui::Button("Cancel", ImVec2(70 * scale, 0))) keep = false;
    if (enter || ok) {
      std::error_code ec;
      if (fs::is_directory(path_, ec))
        change_dir(path_);
      else if (std::strlen(path_) > 0)
        chosen = path_;
    }
    if (chosen || !keep) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  if (chosen || !keep) open_ = false;
  return chosen;
}

}  // namespace memtide::viewer
