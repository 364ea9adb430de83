// Helpers shared by the recorder's end-to-end tests.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace memtide::test {

namespace fs = std::filesystem;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The trace paths a `memtide run` manifest lists (pid, ppid, path per line), root first.
inline std::vector<std::string> manifest_traces(const fs::path& manifest) {
  std::vector<std::string> traces;
  std::istringstream in(slurp(manifest));
  for (std::string line; std::getline(in, line);) traces.push_back(line.substr(line.rfind('\t') + 1));
  return traces;
}

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/memtide-test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace memtide::test
