// A real recording followed while it is written: the example worker runs under the real
// LD_PRELOAD in the background, an analysis::Session advances over its trace every 100 ms,
// and once the recorder is gone the session's Model equals analyze_file's on the whole file.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "analysis/replay.h"
#include "formats/reader.h"
#include "model_equal.h"

namespace memtide::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

TEST(LiveSession, FollowsARecordingAndEndsLikeTheWholeFile) {
  const std::string path = "/tmp/memtide-live-test." + std::to_string(::getpid()) + ".mtide";
  std::remove(path.c_str());
  const std::string cmd = "LD_PRELOAD=" MT_PRELOAD " MEMTIDE_OUTPUT=" + path + " MEMTIDE_QUIET=1 " MT_WORKER
                          " --seconds 3 >/dev/null 2>&1 &";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const auto deadline = Clock::now() + 120s;  // watchdog: the worker runs for 3 s

  // The recorder writes the header first: retry until the file is a trace.
  analysis::Session s;
  std::string err = "not created yet";
  while (!err.empty() && Clock::now() < deadline) {
    if (file_size(path) >= 32) err = s.open(path);
    if (!err.empty()) std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(err, "");

  int advances = 0, while_writing = 0;
  uint64_t events = 0;
  for (;;) {
    ASSERT_LT(Clock::now(), deadline) << "the recording did not end";
    const bool writing = fmt::is_being_written(path);
    s.advance();
    ++advances;
    if (writing) ++while_writing;
    const std::unique_ptr<analysis::Model> snap = s.snapshot();
    EXPECT_GE(snap->events, events);
    events = snap->events;
    if (!writing) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_GE(while_writing, 2) << "the session should have followed the file while it grew";
  s.finish();
  const std::unique_ptr<analysis::Model> live = s.snapshot();
  // Each block was read once: beyond the file's bytes, at most a block header per advance
  // (the header of a block not yet written whole is read again next time).
  EXPECT_LE(s.bytes_read(), file_size(path) + static_cast<uint64_t>(advances) * fmt::kBlockHeaderSize);

  analysis::AnalyzeResult whole = analysis::analyze_file(path);
  ASSERT_TRUE(whole.ok()) << whole.error;
  EXPECT_TRUE(whole.model->complete);
  EXPECT_GT(whole.model->events, 1000000u);
  expect_same_model(*live, *whole.model);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace memtide::test
