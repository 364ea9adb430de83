// Sections: [1] PNG  [2] GL helpers (framebuffer object)  [3] the frame loop
#include "viewer/platform.h"

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <GL/gl.h>
#include <GL/glext.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <stb_image_write.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

namespace memtide::viewer {

// ---------------------------------------------------------------------------------------
// [1] PNG
// ---------------------------------------------------------------------------------------

bool write_png(const std::string& path, int width, int height, const unsigned char* rgba) {
  return stbi_write_png(path.c_str(), width, height, 4, rgba, width * 4) != 0;
}

// ---------------------------------------------------------------------------------------
// [2] GL helpers: the framebuffer object of the screenshot mode. GL 3.0 entry points are
//     fetched through GLFW (libGL only promises the 1.x ones).
// ---------------------------------------------------------------------------------------

namespace {

struct GlFbo {
  PFNGLGENFRAMEBUFFERSPROC gen_fb = nullptr;
  PFNGLBINDFRAMEBUFFERPROC bind_fb = nullptr;
  PFNGLFRAMEBUFFERRENDERBUFFERPROC fb_rb = nullptr;
  PFNGLGENRENDERBUFFERSPROC gen_rb = nullptr;
  PFNGLBINDRENDERBUFFERPROC bind_rb = nullptr;
  PFNGLRENDERBUFFERSTORAGEPROC rb_storage = nullptr;
  PFNGLCHECKFRAMEBUFFERSTATUSPROC status = nullptr;
  PFNGLDELETEFRAMEBUFFERSPROC del_fb = nullptr;
  PFNGLDELETERENDERBUFFERSPROC del_rb = nullptr;
  GLuint fb = 0, rb = 0;

  bool create(int w, int h) {
    gen_fb = reinterpret_cast<PFNGLGENFRAMEBUFFERSPROC>(glfwGetProcAddress("glGenFramebuffers"));
    bind_fb = reinterpret_cast<PFNGLBINDFRAMEBUFFERPROC>(glfwGetProcAddress("glBindFramebuffer"));
    fb_rb = reinterpret_cast<PFNGLFRAMEBUFFERRENDERBUFFERPROC>(glfwGetProcAddress("glFramebufferRenderbuffer"));
    gen_rb = reinterpret_cast<PFNGLGENRENDERBUFFERSPROC>(glfwGetProcAddress("glGenRenderbuffers"));
    bind_rb = reinterpret_cast<PFNGLBINDRENDERBUFFERPROC>(glfwGetProcAddress("glBindRenderbuffer"));
    rb_storage = reinterpret_cast<PFNGLRENDERBUFFERSTORAGEPROC>(glfwGetProcAddress("glRenderbufferStorage"));
    status = reinterpret_cast<PFNGLCHECKFRAMEBUFFERSTATUSPROC>(glfwGetProcAddress("glCheckFramebufferStatus"));
    del_fb = reinterpret_cast<PFNGLDELETEFRAMEBUFFERSPROC>(glfwGetProcAddress("glDeleteFramebuffers"));
    del_rb = reinterpret_cast<PFNGLDELETERENDERBUFFERSPROC>(glfwGetProcAddress("glDeleteRenderbuffers"));
    if (!gen_fb || !bind_fb || !fb_rb || !gen_rb || !bind_rb || !rb_storage || !status || !del_fb || !del_rb) return false;
    gen_rb(1, &rb);
    bind_rb(GL_RENDERBUFFER, rb);
    rb_storage(GL_RENDERBUFFER, GL_RGBA8, w, h);
    gen_fb(1, &fb);
    bind_fb(GL_FRAMEBUFFER, fb);
    fb_rb(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, rb);
    return status(GL_FRAMEBUFFER) == GL_FRAMEBUFFER_COMPLETE;
  }
  void destroy() {
    if (fb) del_fb(1, &fb);
    if (rb) del_rb(1, &rb);
    fb = rb = 0;
  }
};

App* g_app = nullptr;  // for the GLFW drop callback, which carries no user pointer of ours

void on_drop(GLFWwindow*, int count, const char** paths) {
  if (g_app && count > 0) g_app->open(paths[0]);
}

void on_glfw_error(int code, const char* what) { std::fprintf(stderr, "memtide-view: GLFW error %d: %s\n", code, what); }

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

// ---------------------------------------------------------------------------------------
// [3] The frame loop
// ---------------------------------------------------------------------------------------

int run_viewer(App& app, const RunOptions& o) {
  const bool offscreen = !o.screenshot.empty();
  glfwSetErrorCallback(offscreen ? nullptr : on_glfw_error);
  if (!glfwInit()) {
    std::fprintf(stderr, "memtide-view: cannot open a window (no display? for screenshots use xvfb-run -a)\n");
    return 2;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  if (offscreen) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  GLFWwindow* win = glfwCreateWindow(offscreen ? 64 : o.width, offscreen ? 64 : o.height, "memtide", nullptr, nullptr);
  if (!win) {
    glfwTerminate();
    std::fprintf(stderr, "memtide-view: cannot create an OpenGL 3.3 window\n");
    return 2;
  }
  glfwMakeContextCurrent(win);
  glfwSwapInterval(offscreen ? 0 : 1);
  g_app = &app;
  glfwSetDropCallback(win, on_drop);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // one full-window layout; settings live in settings.cpp
  io.ConfigFlags |= ImGuiConfigFlags_NavEnableKeyboard;
  ImGui_ImplGlfw_InitForOpenGL(win, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  if (!offscreen) {
    float xs = 1, ys = 1;
    glfwGetWindowContentScale(win, &xs, &ys);
    app.set_default_scale(std::max(1.0f, xs));
  }

  GlFbo fbo;
  if (offscreen && !fbo.create(o.width, o.height)) {
    std::fprintf(stderr, "memtide-view: cannot create an off-screen framebuffer\n");
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(win);
    glfwTerminate();
    return 2;
  }

  int status = 0;
  int settled = 0, frame_no = 0;
  ViewKind target_view = ViewKind::Summary;
  const double start = now_ms();
  bool setup_done = false;
  std::string last_title;
  while (!glfwWindowShouldClose(win) && !app.quit_requested()) {
    const bool busy = app.loader().progress().busy || !app.complete();
    if (offscreen)
      glfwPollEvents();
    else if (busy || app.snapshot().live)
      glfwWaitEventsTimeout(1.0 / 60);  // keep the progress bar and the live dot moving
    else
      glfwWaitEventsTimeout(0.25);
    const double t0 = now_ms();  // the frame's own work, not the wait for events
    const double c0 = thread_cpu_ms();
    if (app.style_changed()) {
      app.apply_style();
      ImGui_ImplOpenGL3_DestroyFontsTexture();
      ImGui_ImplOpenGL3_CreateFontsTexture();
    }
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (offscreen) {
      io.DisplaySize = ImVec2(static_cast<float>(o.width), static_cast<float>(o.height));
      io.DisplayFramebufferScale = ImVec2(1, 1);
      io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);  // no pointer: no hover effects in the picture
    }
    ImGui::NewFrame();
    if (!setup_done) {
      setup_done = true;
      if (o.setup) o.setup(app);
    }
    app.draw();
    ImGui::Render();
    const double t_ui = now_ms(), c_ui = thread_cpu_ms();
    int fw = o.width, fh = o.height;
    if (!offscreen) glfwGetFramebufferSize(win, &fw, &fh);
    glViewport(0, 0, fw, fh);
    const ImVec4 bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
    glClearColor(bg.x, bg.y, bg.z, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (offscreen) glFinish();
    const double t1 = now_ms();
    const auto view_index = static_cast<std::size_t>(app.current_view());
    app.stats().view_names[view_index % FrameStats::kViews] = view_name(app.current_view());
    app.stats().add(t_ui - t0, c_ui - c0, t1 - t0, busy, view_index);
    if (o.stats && !busy && view_index < FrameStats::kViews)
      app.stats().per_view_draw[view_index] = count_draws(ImGui::GetDrawData());
    if (!offscreen) {
      const std::string title = app.snapshot().path.empty() ? "memtide" : "memtide - " + app.snapshot().path;
      if (title != last_title) glfwSetWindowTitle(win, title.c_str());
      last_title = title;
      glfwSwapBuffers(win);
      continue;
    }
    // Screenshot mode.
    const Snapshot& snap = app.snapshot();
    if (!snap.error.empty()) {
      std::fprintf(stderr, "memtide-view: %s: %s\n", snap.path.c_str(), snap.error.c_str());
      status = 2;
      break;
    }
    // Measurement: a round through every view first (Compare when a baseline is open), then
    // back to the one asked for.
    const int views = static_cast<int>(snap.compare ? ViewKind::Count_ : ViewKind::Compare);
    if (app.complete()) {
      if (settled == 0) target_view = app.current_view();
      if (o.cycle_frames > 0 && settled < views * o.cycle_frames)
        app.select_view(static_cast<ViewKind>(settled / o.cycle_frames));
      else if (o.cycle_frames > 0 && settled == views * o.cycle_frames)
        app.select_view(target_view);
      ++settled;
    }
    const int cycle_total = o.cycle_frames > 0 ? views * o.cycle_frames + 1 : 0;
    ++frame_no;
    if (o.capture_frame > 0 ? frame_no >= o.capture_frame : settled >= cycle_total + o.settle_frames + o.extra_frames) {
      std::vector<unsigned char> px(static_cast<std::size_t>(o.width) * o.height * 4);
      glPixelStorei(GL_PACK_ALIGNMENT, 1);
      glReadPixels(0, 0, o.width, o.height, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
      // GL's rows start at the bottom; PNG's at the top. Opaque alpha throughout.
      std::vector<unsigned char> flipped(px.size());
      const std::size_t row = static_cast<std::size_t>(o.width) * 4;
      for (int y = 0; y < o.height; ++y)
        std::copy_n(&px[static_cast<std::size_t>(o.height - 1 - y) * row], row, &flipped[static_cast<std::size_t>(y) * row]);
      for (std::size_t i = 3; i < flipped.size(); i += 4) flipped[i] = 255;
      if (!write_png(o.screenshot, o.width, o.height, flipped.data())) {
        std::fprintf(stderr, "memtide-view: cannot write %s\n", o.screenshot.c_str());
        status = 2;
      }
      break;
    }
    if (busy) {  // about 60 frames a second while loading, as on a screen
      const double left = 16.6 - (now_ms() - t0);
      if (left > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(left * 1000)));
    }
    if ((t1 - start) / 1000.0 > o.timeout_s) {
      std::fprintf(stderr, "memtide-view: gave up after %.0f s: the trace did not finish loading\n", o.timeout_s);
      status = 2;
      break;
    }
  }
  if (o.stats) std::printf("frame times:\n%s", app.stats().report().c_str());
  if (o.stats) std::fflush(stdout);
  g_app = nullptr;
  fbo.destroy();
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(win);
  glfwTerminate();
  return status;
}

}  // namespace memtide::viewer
