// Running memtide-cli in the CLI tests: exit status, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/formats/test_util.h"

namespace memtide {

struct CliRun {
  int status = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs memtide-cli with `args` (already shell-quoted) in directory `cwd`.
inline CliRun run_cli(const std::string& args, const std::string& cwd = ".") {
  const std::string out = test::temp_path("stdout"), err = test::temp_path("stderr");
  const std::string cmd = "cd '" + cwd + "' && '" MEMTIDE_CLI "' " + args + " >'" + out + "' 2>'" + err + "' </dev/null";
  const int rc = std::system(cmd.c_str());
  CliRun r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

inline std::size_t count_lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

inline std::string write_sample(const std::string& name) {
  const std::string path = test::temp_path(name);
  test::write_bytes(path, test::sample_trace());
  return path;
}

}  // namespace memtide
