// Viewer settings kept between runs in $XDG_CONFIG_HOME/memtide (else ~/.config/memtide):
//   recent    one trace path per line, most recent first (at most kMaxRecent)
//   viewer    "key=value" lines: scale, theme
#pragma once

#include <string>
#include <vector>

namespace memtide::viewer {

inline constexpr std::size_t kMaxRecent = 12;

struct Settings {
  float scale = 0;  // 0: not set (use the monitor's content scale)
  bool dark = true;
  std::vector<std::string> recent;
};

// The configuration directory ("" when neither XDG_CONFIG_HOME nor HOME is set).
std::string config_dir();

Settings load_settings(const std::string& dir);
// Creates the directory when needed; false when it cannot be written (settings are optional).
bool save_settings(const std::string& dir, const Settings& s);

// Moves (or adds) `path` to the front of the list, made absolute, capped at kMaxRecent.
void add_recent(std::vector<std::string>& recent, const std::string& path);

}  // namespace memtide::viewer
