// Dear ImGui without a window, for the views' tests: a context the size of a viewer window,
// and one frame in which a view draws with the mouse where the test puts it.
#pragma once

#include <imgui.h>

namespace memtide::viewer {

inline void headless_context() {
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = ImVec2(1000, 600);
  io.DeltaTime = 1.0f / 60;
  unsigned char* px;
  int w, h;
  io.Fonts->GetTexDataAsRGBA32(&px, &w, &h);  // (the font atlas is built before the first frame)
}

// One frame: `draw` runs inside a window that fills the display.
template <typename Draw>
void headless_frame(Draw draw) {
  ImGui::NewFrame();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
  ImGui::Begin("w", nullptr, ImGuiWindowFlags_NoDecoration);
  draw();
  ImGui::End();
  ImGui::Render();
}

}  // namespace memtide::viewer
