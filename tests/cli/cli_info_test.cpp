// `memtide-cli info` on good, truncated, corrupt, empty, missing, growing files: exit status,
// the summary on stdout, and exactly one error line on stderr when something is wrong.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "formats/decoder.h"
#include "formats/encoder.h"
#include "formats/writer.h"
#include "tests/cli/cli_run.h"
#include "tests/formats/test_util.h"

namespace memtide {
namespace {

using namespace fmt;

TEST(CliInfo, GoodFileExitsZero) {
  const auto path = write_sample("good.mtide");
  const CliRun r = run_cli("info '" + path + "'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("state        complete (end: exit, status 3)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pid 4242, ppid 1"), std::string::npos);
  EXPECT_NE(r.out.find("command      demo --size 'a b'"), std::string::npos);
}

// Names are printed as they are when they are text (a UTF-8 file name), and control characters
// and bytes that are not UTF-8 as \xNN, so that a file name cannot drive the terminal.
TEST(CliInfo, NamesPrintAsTextButControlBytesAreEscaped) {
  const std::string name = "caf\xc3\xa9 \xe6\x97\xa5 \x1b[31m \xc2\x9b \xff.mtide";
  const auto path = write_sample(name);
  const CliRun r = run_cli("info '" + path + "'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("caf\xc3\xa9 \xe6\x97\xa5 \\x1b[31m \\xc2\\x9b \\xff.mtide"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
}

TEST(CliInfo, GoldenText) {
  const std::string dir = test::temp_path("golden");
  std::filesystem::create_directories(dir);
  test::write_bytes(dir + "/sample.mtide", test::sample_trace());
  const CliRun r = run_cli("info sample.mtide", dir);
  ASSERT_EQ(r.status, 0);
  const std::string golden = std::string(MEMTIDE_GOLDEN_DIR) + "/info_sample.txt";
  if (std::getenv("MEMTIDE_UPDATE_GOLDEN")) std::ofstream(golden) << r.out;
  EXPECT_EQ(r.out, slurp(golden)) << "regenerate with MEMTIDE_UPDATE_GOLDEN=1 and review the diff";
}

TEST(CliInfo, TruncatedFileIsSummarisedWithOneWarning) {
  auto bytes = test::sample_trace();
  const auto offs = test::block_offsets(bytes);
  const uint64_t last = offs.back();
  bytes.resize(last + kBlockHeaderSize + 2);
  const std::string path = test::temp_path("cut.mtide");
  test::write_bytes(path, bytes);
  const CliRun r = run_cli("info '" + path + "'");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.err, "memtide: " + path + ": warning: truncated block at offset " + std::to_string(last) +
                       " (file ends inside the block payload)\n");
  // What could be read is still summarised.
  EXPECT_NE(r.out.find("records"), std::string::npos);
  EXPECT_NE(r.out.find("truncated at offset " + std::to_string(last)), std::string::npos);
}

TEST(CliInfo, CorruptFileExitsTwoWithOffset) {
  auto bytes = test::sample_trace();
  const auto offs = test::block_offsets(bytes);
  bytes[offs[1] + kBlockHeaderSize + 1] ^= 0x55;
  const std::string path = test::temp_path("bad.mtide");
  test::write_bytes(path, bytes);
  const CliRun r = run_cli("info '" + path + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "memtide: " + path + ": corrupt block at offset " + std::to_string(offs[1]) +
                       ": payload checksum mismatch\n");
  EXPECT_NE(r.out.find("process"), std::string::npos);
}

TEST(CliInfo, EmptyMissingDirectoryGarbage) {
  const std::string empty = test::temp_path("empty.mtide");
  test::write_bytes(empty, {});
  const std::string garbage = test::temp_path("garbage.mtide");
  test::write_bytes(garbage, {'n', 'o', 't', ' ', 'a', ' ', 't', 'r', 'a', 'c', 'e', '\n'});
  const std::string missing = test::temp_path("missing.mtide");
  const std::string dir = testing::TempDir();
  const struct {
    std::string path, message;
  } cases[] = {
      {empty, "empty file (no file header)"},
      {missing, "no such file"},
      {dir, "is a directory, not a trace file"},
      {garbage, "not a memtide trace (bad magic at offset 0)"},
  };
  for (const auto& c : cases) {
    const CliRun r = run_cli("info '" + c.path + "'");
    EXPECT_EQ(r.status, 2) << c.path;
    EXPECT_EQ(r.err, "memtide: " + c.path + ": " + c.message + "\n");
    EXPECT_EQ(r.out, "");
  }
}

TEST(CliInfo, FutureMajorVersion) {
  auto bytes = test::sample_trace();
  wire::store_le<uint16_t>(bytes.data() + 8, kVersionMajor + 1);
  const std::string path = test::temp_path("future.mtide");
  test::write_bytes(path, bytes);
  const CliRun r = run_cli("info '" + path + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(count_lines(r.err), 1u);
  EXPECT_NE(r.err.find("unsupported format version " + std::to_string(kVersionMajor + 1) + "." + std::to_string(kVersionMinor)),
            std::string::npos)
      << r.err;
}

TEST(CliInfo, NewerMinorWarnsButSucceeds) {
  auto bytes = test::sample_trace();
  wire::store_le<uint16_t>(bytes.data() + 10, kVersionMinor + 1);
  test::fix_file_header_checksum(bytes);
  const std::string path = test::temp_path("minor.mtide");
  test::write_bytes(path, bytes);
  const CliRun r = run_cli("info '" + path + "'");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(count_lines(r.err), 1u);
  const std::string newer = std::to_string(kVersionMajor) + "." + std::to_string(kVersionMinor + 1);
  EXPECT_EQ(r.err.rfind("memtide: " + path + ": warning: format version " + newer + " is newer", 0), 0u) << r.err;
}

TEST(CliInfo, UnknownRecordsAreCountedWithAWarning) {
  std::vector<uint8_t> bytes;
  TraceWriter w;
  w.open_memory(bytes);
  const uint8_t payload[] = {1, 2, 3};
  w.append_unknown(1, 0x30, payload);
  w.append(1, Alloc{1, 0x10, 8, 0, 0, Api::Malloc});
  w.end(End{2, EndReason::Exit, 0, 1, 0, 0});
  w.close();
  const std::string path = test::temp_path("unknown.mtide");
  test::write_bytes(path, bytes);
  const CliRun r = run_cli("info '" + path + "'");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("unknown 0x30"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "memtide: " + path + ": warning: skipped 1 record(s) with unknown tag 0x30 (written by a newer memtide?)\n");
}

// `info --end` reads how the process ended from the last 8 MiB when the file is larger (found
// by the first block header there), from the whole file otherwise or when the tail has none.
TEST(CliInfo, EndIsReadFromTheTail) {
  const auto small = write_sample("small.mtide");
  CliRun r = run_cli("info --end '" + small + "'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "exit 3\n");

  // 20 MiB of incompressible allocations, then a signal's End, then appended symbols.
  std::vector<uint8_t> big;
  {
    TraceWriter w;
    w.open_memory(big);
    std::mt19937_64 rng(5);
    uint64_t t = 1000;
    for (int i = 0; i < 2000000; ++i) {
      Alloc a;
      a.time = t += rng() % 1000;
      a.addr = rng() & 0x7ffffffffff0ull;
      a.size = rng() % 100000;
      a.stack = static_cast<uint32_t>(rng() % 100000);
      w.append(1, a);
    }
    End e;
    e.time = t + 1;
    e.reason = EndReason::Signal;
    e.status = 15;
    w.end(e);
    const SymbolEntry sym[] = {{0x10, "main", "main.cpp", 3, 0}};
    w.append_symbols(0, 1, sym);
    w.flush(0);
  }
  ASSERT_GT(big.size(), std::size_t{20} << 20);
  const std::string big_path = test::temp_path("big.mtide");
  test::write_bytes(big_path, big);
  r = run_cli("info --end '" + big_path + "'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "signal 15\n");
  r = run_cli("info --end --json '" + big_path + "'");
  EXPECT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["reason"], "signal");
  EXPECT_EQ(j["status"], 15);

  // Cut before the End: none (the whole file is read to be sure).
  test::write_bytes(big_path, std::vector<uint8_t>(big.begin(), big.begin() + static_cast<std::ptrdiff_t>(big.size() / 2)));
  r = run_cli("info --end '" + big_path + "'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "none\n");
}

TEST(CliInfo, StillGrowingIsNotAnError) {
  const std::string path = test::temp_path("growing.mtide");
  TraceWriter w;
  w.open(path);  // holds LOCK_EX like the recorder
  w.append(1, Alloc{1, 0x10, 8, 0, 0, Api::Malloc});
  w.flush(1);
  {
    // Half a block, as if the recorder were in the middle of a write.
    std::ofstream f(path, std::ios::binary | std::ios::app);
    const char partial[20] = {'M', 'T', 'B', 'K'};
    f.write(partial, sizeof partial);
  }
  const CliRun r = run_cli("info '" + path + "'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("still growing"), std::string::npos) << r.out;
  w.close();
  // Once the writer is gone, the same tail is a truncation.
  const CliRun after = run_cli("info '" + path + "'");
  EXPECT_EQ(after.status, 0);
  EXPECT_NE(after.err.find("warning: truncated block at offset"), std::string::npos);
}

TEST(CliInfo, RecorderThatHasNotWrittenTheHeaderYet) {
  const std::string path = test::temp_path("starting.mtide");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  ASSERT_EQ(::write(fd, kFileMagic, 5), 5);
  const CliRun r = run_cli("info '" + path + "'");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("still growing"), std::string::npos) << r.out;
  ::close(fd);
  const CliRun after = run_cli("info '" + path + "'");
  EXPECT_EQ(after.status, 2);
  EXPECT_EQ(after.err, "memtide: " + path + ": truncated file header (the file ends at offset 5, inside the 32-byte header)\n");
}

TEST(CliInfo, IncompleteTraceWarns) {
  std::vector<uint8_t> bytes;
  TraceWriter w;
  w.open_memory(bytes);
  w.append(1, Alloc{1, 0x10, 8, 0, 0, Api::Malloc});
  w.close();
  const std::string path = test::temp_path("noend.mtide");
  test::write_bytes(path, bytes);
  const CliRun r = run_cli("info '" + path + "'");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("state        incomplete"), std::string::npos);
  EXPECT_NE(r.err.find("warning: no end record"), std::string::npos);
}

TEST(CliInfo, Json) {
  const auto path = write_sample("json.mtide");
  const CliRun r = run_cli("info --json '" + path + "'");
  ASSERT_EQ(r.status, 0);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["state"], "complete");
  EXPECT_EQ(j["process"]["pid"], 4242);
  EXPECT_EQ(j["process"]["argv"][2], "a b");
  EXPECT_EQ(j["process"]["options"]["sample"], "512");
  EXPECT_EQ(j["records"]["alloc"], 3);
  EXPECT_EQ(j["records"]["free"], 2);
  EXPECT_EQ(j["duration_ns"], 700);
  EXPECT_EQ(j["end"]["lost_events"], 7);
  EXPECT_EQ(j["size_bytes"], std::filesystem::file_size(path));
  EXPECT_TRUE(j["error"].is_null());
}

TEST(CliInfo, JsonOnTruncatedFileStillParses) {
  auto bytes = test::sample_trace();
  bytes.pop_back();
  const std::string path = test::temp_path("cut.json.mtide");
  test::write_bytes(path, bytes);
  const CliRun r = run_cli("info --json '" + path + "'");
  EXPECT_EQ(r.status, 0);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["state"], "truncated");
  EXPECT_EQ(j["error"]["offset"], test::block_offsets(test::sample_trace()).back());
}

TEST(CliUsage, BadOptionsExitTwoHelpExitsZero) {
  EXPECT_EQ(run_cli("info --no-such-option x").status, 2);
  EXPECT_EQ(run_cli("info").status, 2);
  EXPECT_EQ(run_cli("").status, 2);
  const CliRun unknown = run_cli("no-such-command file.mtide");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_EQ(unknown.err, "memtide: unknown command 'no-such-command' (see memtide help)\n");
  const CliRun bad = run_cli("info --no-such-option x");
  EXPECT_EQ(count_lines(bad.err), 1u) << bad.err;
  EXPECT_EQ(bad.err.rfind("memtide: ", 0), 0u);
  const CliRun help = run_cli("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("info"), std::string::npos);
  EXPECT_EQ(run_cli("info --help").status, 0);
}

}  // namespace
}  // namespace memtide
