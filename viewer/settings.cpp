#include "viewer/settings.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace memtide::viewer {

namespace fs = std::filesystem;

std::string config_dir() {
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return std::string(x) + "/memtide";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.config/memtide";
  return {};
}

Settings load_settings(const std::string& dir) {
  Settings s;
  if (dir.empty()) return s;
  std::ifstream recent(dir + "/recent");
  for (std::string line; std::getline(recent, line);)
    if (!line.empty() && s.recent.size() < kMaxRecent) s.recent.push_back(line);
  std::ifstream conf(dir + "/viewer");
  for (std::string line; std::getline(conf, line);) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "scale") {
      const float v = std::strtof(value.c_str(), nullptr);
      if (v >= 0.5f && v <= 4.0f) s.scale = v;
    } else if (key == "theme") {
      s.dark = value != "light";
    }
  }
  return s;
}

bool save_settings(const std::string& dir, const Settings& s) {
  if (dir.empty()) return false;
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::ofstream recent(dir + "/recent", std::ios::trunc);
  for (const std::string& r : s.recent) recent << r << '\n';
  std::ofstream conf(dir + "/viewer", std::ios::trunc);
  if (s.scale > 0) conf << "scale=" << s.scale << '\n';
  conf << "theme=" << (s.dark ? "dark" : "light") << '\n';
  return static_cast<bool>(recent) && static_cast<bool>(conf);
}

void add_recent(std::vector<std::string>& recent, const std::string& path) {
  std::error_code ec;
  std::string abs = fs::absolute(path, ec).lexically_normal().string();
  if (ec) abs = path;
  recent.erase(std::remove(recent.begin(), recent.end(), abs), recent.end());
  recent.insert(recent.begin(), abs);
  if (recent.size() > kMaxRecent) recent.resize(kMaxRecent);
}

}  // namespace memtide::viewer
