// A file dialog drawn with ImGui: directory listing (read when the directory changes, not per
// frame), directories first, traces (*.mtide) highlighted, a path field for typing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memtide::viewer {

struct DirEntry {
  std::string name;
  bool is_dir = false;
  uint64_t size = 0;
  bool is_trace = false;
};

// Sorted listing of `dir` (directories first, then by name; hidden entries skipped unless
// `hidden`). `error` set when it cannot be read.
std::vector<DirEntry> list_directory(const std::string& dir, bool hidden, std::string& error);

class FileBrowser {
 public:
  void open(const std::string& title, const std::string& start_dir);
  bool is_open() const { return open_; }
  // Draws the dialog while it is open; returns the chosen file once.
  std::optional<std::string> draw(float scale);

 private:
  void change_dir(const std::string& dir);
  std::string title_;
  std::string dir_;
  std::vector<DirEntry> entries_;
  std::string error_;
  char path_[4096] = {};
  int selected_ = -1;
  bool open_ = false, popup_pending_ = false, hidden_ = false;
};

}  // namespace memtide::viewer
