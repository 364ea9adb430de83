// The files memtide-cli commands write (symbolize -o, check --junit, flamegraph -o): never over
// one of the command's inputs, whatever name reaches it; written whole or not at all; private
// (0600: they hold addresses).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/cli_run.h"
#include "tests/formats/test_util.h"

namespace memtide {
namespace {

namespace fs = std::filesystem;

// A fresh directory holding the sample trace as t.mtide.
std::string sample_dir() {
  const std::string dir = test::temp_path("out");
  fs::create_directories(dir);
  test::write_bytes(dir + "/t.mtide", test::sample_trace());
  return dir;
}

unsigned mode_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_mode & 0777 : 0;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Every name by which a command could be told to write over its input trace: the same name,
// another spelling of it, a symbolic link to it.
TEST(CliOutput, NoCommandWritesOverItsInput) {
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"symbolize t.mtide -o ", ""},
      {"check t.mtide --junit ", ""},
      {"flamegraph t.mtide -o ", ".svg"},
  };
  for (const auto& [cmd, link_suffix] : commands) {
    for (const std::string& name : {std::string("t.mtide"), std::string("./t.mtide"), std::string("link")}) {
      if (link_suffix.size() && name != "link") continue;  // (flamegraph takes .svg names only)
      SCOPED_TRACE(cmd + name);
      const std::string dir = sample_dir();
      const std::string out = name == "link" ? "link" + link_suffix : name;
      if (name == "link") fs::create_symlink("t.mtide", dir + "/" + out);
      const auto before = test::read_bytes(dir + "/t.mtide");
      const CliRun r = run_cli(cmd + out, dir);
      EXPECT_EQ(r.status, 2) << r.err;
      EXPECT_NE(r.err.find("is the input file"), std::string::npos) << r.err;
      EXPECT_EQ(test::read_bytes(dir + "/t.mtide"), before) << "the trace was changed";
    }
  }
  // The suppressions file is an input of check too.
  const std::string dir = sample_dir();
  test::write_bytes(dir + "/s.supp", {'l', 'e', 'a', 'k', ':', 'x', '\n'});
  const CliRun r = run_cli("check t.mtide --suppressions s.supp --junit s.supp", dir);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(slurp(dir + "/s.supp"), "leak:x\n");
}

// An output that cannot be made leaves the file of that name as it was, and no temporary file.
TEST(CliOutput, FailedOutputLeavesTheOldFile) {
  const std::string dir = sample_dir();
  auto bytes = test::read_bytes(dir + "/t.mtide");
  // A corrupt block: the magic of the second block.
  const std::string magic = "MTBK";
  const auto second = std::search(std::search(bytes.begin(), bytes.end(), magic.begin(), magic.end()) + 1, bytes.end(),
                                  magic.begin(), magic.end());
  ASSERT_NE(second, bytes.end());
  *second ^= 0xff;
  test::write_bytes(dir + "/bad.mtide", bytes);
  test::write_bytes(dir + "/old.mtide", {'o', 'l', 'd'});
  const CliRun r = run_cli("symbolize bad.mtide -o old.mtide", dir);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(slurp(dir + "/old.mtide"), "old");
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"bad.mtide", "old.mtide", "t.mtide"}));
}

// What the commands write is the user's alone (mode 0600), as the traces are, and only the
// named file is left behind.
TEST(CliOutput, OutputsArePrivate) {
  const std::string dir = sample_dir();
  const CliRun s = run_cli("symbolize t.mtide -o copy.mtide", dir);
  EXPECT_EQ(s.status, 0) << s.err;
  EXPECT_EQ(mode_of(dir + "/copy.mtide"), 0600u);
  // (The sample is a sampled trace: check needs a leak limit above 0.)
  const CliRun c = run_cli("check --allow-incomplete --max-leaked-bytes 1MiB t.mtide --junit junit.xml", dir);
  EXPECT_NE(c.status, 2) << c.err;
  EXPECT_EQ(mode_of(dir + "/junit.xml"), 0600u);
  const CliRun f = run_cli("flamegraph t.mtide -o f.svg", dir);
  EXPECT_EQ(f.status, 0) << f.err;
  EXPECT_EQ(mode_of(dir + "/f.svg"), 0600u);
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"copy.mtide", "f.svg", "junit.xml", "t.mtide"}));
}

// check's sizes mean what the recorder's do (formats/size.h): 1KB is 1000 bytes, 1KiB 1024; a
// unit letter alone is refused.
TEST(CliSizes, CheckLimitsUseTheOneMeaningOfUnits) {
  const std::string dir = sample_dir();
  const CliRun bare = run_cli("check t.mtide --max-peak-bytes 64k --max-leaked-bytes 1TB", dir);
  EXPECT_EQ(bare.status, 2);
  EXPECT_NE(bare.err.find("ambiguous"), std::string::npos) << bare.err;
}

// An output that is not a regular file (a device, a pipe) is written to as it is, never replaced.
TEST(CliOutput, ADeviceIsWrittenToNotReplaced) {
  const std::string dir = sample_dir();
  const CliRun r = run_cli("check --allow-incomplete --max-leaked-bytes 1MiB t.mtide --junit /dev/null", dir);
  EXPECT_NE(r.status, 2) << r.err;
  struct stat st;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null was replaced";
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"t.mtide"});
}

}  // namespace
}  // namespace memtide
