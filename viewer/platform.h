// The window system side of memtide-view: a GLFW window with an OpenGL 3.3 context, the ImGui
// backends, drag-and-drop, the frame loop with frame timing, and the off-screen screenshot
// mode (render into a framebuffer object, read it back with glReadPixels, write a PNG).
#pragma once

#include <functional>
#include <string>

#include "viewer/app.h"

namespace memtide::viewer {

struct RunOptions {
  int width = 1280, height = 800;
  std::string screenshot;   // non-empty: render off-screen, write this PNG and return
  int settle_frames = 6;    // frames drawn after everything is loaded, before the read-back
  int extra_frames = 0;     // more frames after that (frame-time measurement)
  int cycle_frames = 0;     // before those: this many frames in each view (frame-time measurement)
  int capture_frame = 0;    // > 0: take the picture at this frame, loaded or not (the loading screen)
  double timeout_s = 600;   // screenshot mode: give up after this long
  bool stats = false;       // print frame-time percentiles at the end
  // Called once the first frame's ImGui context exists (to apply command-line state).
  std::function<void(App&)> setup;
};

// Runs the viewer until the window is closed (or the screenshot is written). Returns the
// process exit status: 0, or 2 after printing one line "memtide-view: ..." on stderr.
int run_viewer(App& app, const RunOptions& o);

// Writes RGBA pixels (top row first) as a PNG. False on failure.
bool write_png(const std::string& path, int width, int height, const unsigned char* rgba);

}  // namespace memtide::viewer
