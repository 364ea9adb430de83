// An attached trace (`memtide attach`): the frees of blocks allocated before the recording are
// counted apart, not as anomalies and not against the heap.
#include <gtest/gtest.h>

#include "analysis/attached.h"
#include "analysis/replay.h"
#include "tests/analysis/trace_builder.h"

namespace memtide::test {
namespace {

std::vector<uint8_t> trace_with_early_frees(const std::string& options) {
  TraceBuilder::Options o;
  o.options = options;
  TraceBuilder b(o);
  b.stack(1, 1, 0, {0x100});
  b.free(1, 1, 0xdead).free(1, 2, 0xbeef);           // allocated before the recording
  b.malloc(1, 3, 0x10, 8, 1).free(1, 4, 0x10);       // allocated and freed while recording
  b.malloc(1, 5, 0x20, 16, 1);                       // live at the end
  return b.end(10);
}

TEST(Attached, FreesOfBlocksAllocatedBeforeTheRecordingAreCountedApart) {
  auto m = analyze(trace_with_early_frees("MEMTIDE_OUTPUT=/t.mtide\nattached=1\n"));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->process.attached);
  EXPECT_EQ(m->freed_before_recording[0], 2u);
  EXPECT_EQ(analysis::freed_before_recording(*m), 2u);
  EXPECT_EQ(m->anomalies.unknown_free_count[0], 0u);
  EXPECT_TRUE(m->anomalies.unknown_frees.empty());
  EXPECT_EQ(m->heap().frees, 1u);
  EXPECT_EQ(m->heap().leaked_bytes, 16u);
  EXPECT_EQ(analysis::attached_note(*m),
            "recording started at attach time (memtide attach), not at the program's start; 2 blocks freed, "
            "allocated before recording (counted apart, not in the heap)");
}

TEST(Attached, ATraceFromTheProgramsStartStillCallsThemAnomalies) {
  auto m = analyze(trace_with_early_frees("MEMTIDE_OUTPUT=/t.mtide\n"));
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->process.attached);
  EXPECT_EQ(m->anomalies.unknown_free_count[0], 2u);
  EXPECT_EQ(analysis::freed_before_recording(*m), 0u);
  EXPECT_EQ(analysis::attached_note(*m), "");
}

}  // namespace
}  // namespace memtide::test
