// What the kept-trace tests share: a scratch directory, commands run with their output, the
// CLI, and a watch of a set's disk use while its recorder runs.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/segment_set.h"

namespace memtide::test {

inline std::string temp_dir() {
  static const std::string dir = [] {
    char t[] = "/tmp/memtide-keep.XXXXXX";
    const char* d = mkdtemp(t);
    return std::string(d ? d : "/tmp");
  }();
  return dir;
}

inline std::string run_out(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = pclose(p);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

inline int wait_for(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

inline std::string cli(const std::string& args, int* status = nullptr) {
  return run_out(std::string(MT_CLI) + " " + args + " 2>&1", status);
}

inline nlohmann::json cli_json(const std::string& args) {
  const std::string t = run_out(std::string(MT_CLI) + " " + args + " 2>/dev/null");
  return nlohmann::json::parse(t, nullptr, false);
}

// Watches a set while its recorder runs: the largest sum of its segments' sizes seen, the
// largest segment, and (with `links`) a hard link to every segment in `links`/ as it appears,
// so that the whole recording outlives the removal of its oldest segments.
struct Watch {
  std::string stem, links;
  std::atomic<bool> stop{false};
  uint64_t most = 0, largest = 0;
  std::set<uint32_t> seen;
  std::thread t;

  void look() {
    uint64_t sum = 0;
    for (const fmt::SegmentPath& p : fmt::list_segments(stem)) {
      struct stat st;
      if (::stat(p.path.c_str(), &st) != 0) continue;
      sum += static_cast<uint64_t>(st.st_size);
      largest = std::max<uint64_t>(largest, static_cast<uint64_t>(st.st_size));
      if (!links.empty() && seen.insert(p.number).second) {
        const std::string to = links + "/" + p.path.substr(p.path.rfind('/') + 1);
        EXPECT_EQ(::link(p.path.c_str(), to.c_str()), 0) << to;
      }
    }
    most = std::max(most, sum);
  }
  void start() {
    if (!links.empty()) ::mkdir(links.c_str(), 0700);
    t = std::thread([this] {
      while (!stop.load()) {
        look();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      look();
    });
  }
  void finish() {
    stop = true;
    t.join();
  }
};

}  // namespace memtide::test
