// Running real programs under the real LD_PRELOAD and the memtide-cli commands on their traces.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace memtide::test {

struct Proc {
  int status = -1;  // exit status, or 128 + signal
  std::string out, err;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A directory for this test process, removed when it exits (set MEMTIDE_KEEP_TEST_FILES=1 to
// keep it for a look).
inline std::string temp_dir() {
  // The name lives in a plain array: the atexit handler runs after static strings are gone.
  static char name[] = "/tmp/memtide-cli-e2e.XXXXXX";
  static std::string dir = [] {
    const char* d = mkdtemp(name);
    if (d && !std::getenv("MEMTIDE_KEEP_TEST_FILES"))
      std::atexit([] {
        const std::string cmd = std::string("rm -rf '") + name + "'";
        if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", name);
      });
    return std::string(d ? d : "/tmp");
  }();
  return dir;
}

// Runs `cmd` through /bin/sh with stdout and stderr captured.
inline Proc sh(const std::string& cmd) {
  static int n = 0;
  const std::string base = temp_dir() + "/run" + std::to_string(n++);
  const std::string full = "(" + cmd + ") >" + base + ".out 2>" + base + ".err </dev/null";
  const int st = std::system(full.c_str());
  Proc r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  r.out = read_file(base + ".out");
  r.err = read_file(base + ".err");
  return r;
}

// Records `program args` into `trace` with libmemtide.so preloaded.
inline Proc record(const std::string& trace, const std::string& program_and_args) {
  std::remove(trace.c_str());
  return sh("LD_PRELOAD=" MT_PRELOAD " MEMTIDE_OUTPUT=" + trace + " " + program_and_args);
}

inline Proc cli(const std::string& args) { return sh(std::string(MT_CLI) + " " + args); }

}  // namespace memtide::test
