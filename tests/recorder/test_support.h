// Helpers shared by the recorder's end-to-end tests.
#pragma once

#include <stdlib.h>

#include <cstdio>
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

// The sums of the "unwind verify: ..." lines MEMTIDE_UNWIND=verify prints, one per process
// (processes 0: no line found).
struct VerifyCounts {
  int processes = 0;
  unsigned long long stacks = 0, fast = 0, differ = 0;
};
inline VerifyCounts verify_counts(const std::string& err) {
  VerifyCounts c;
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    unsigned long long n = 0, f = 0, l = 0, d = 0;
    const size_t at = line.find("unwind verify: ");
    if (at == std::string::npos) continue;
    if (std::sscanf(line.c_str() + at, "unwind verify: %llu stacks, %llu unwound by cached rules, %llu by libunwind only, %llu differ",
                    &n, &f, &l, &d) != 4)
      continue;
    ++c.processes;
    c.stacks += n;
    c.fast += f;
    c.differ += d;
  }
  return c;
}

}  // namespace memtide::test
