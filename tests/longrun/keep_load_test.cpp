// Kept traces under load, recorded as `memtide run --keep` records them: segments that fill
// faster than the writer's flush interval, and a large live set whose checkpoint is a good part
// of a segment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "formats/checkpoint.h"
#include "formats/reader.h"
#include "formats/segment_set.h"
#include "tests/longrun/keep_support.h"

namespace memtide::test {
namespace {

// Segments that fill faster than the writer's flush interval (8 threads making 800,000
// allocations, all freed, as fast as they can, kept to 1 MiB: about a hundred segments in a
// fifth of a second), six times, as `memtide run` records it: each kept set holds a checkpoint
// and the events after it, so that every reader knows what was live at its start. The gate
// finds no false leak, the range does not start at the recording's start, and the run's own
// follower, left more than the set's size behind, starts over rather than take the set for ended.
TEST(KeptTrace, SegmentsFasterThanTheFlushIntervalKeepACheckpoint) {
  constexpr uint64_t kSmall = 1u << 20;
  for (int run = 0; run < 6; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    const std::string stem = temp_dir() + "/rate" + std::to_string(run);
    Watch w;
    w.stem = stem;
    w.start();
    int st = -1;
    const std::string text = run_out(std::string(MT_WRAPPER) + " run --keep 1MiB -o " + stem + ".mtide -- " MT_HIGH_RATE
                                     " 8 100000 2>&1", &st);
    w.finish();
    ASSERT_EQ(st, 0) << text;
    EXPECT_NE(text.find("done 800000"), std::string::npos) << text;
    EXPECT_EQ(text.find("still writing"), std::string::npos) << text;
    EXPECT_EQ(text.find("no end record"), std::string::npos) << text;
    const auto segs = fmt::list_segments(stem);
    ASSERT_FALSE(segs.empty());
    EXPECT_GT(segs.front().number, 8u) << "the set did not rotate enough to prove anything";
    EXPECT_LE(w.most, kSmall + kSmall / 8);  // (the disk use bound: the size and one segment)

    const nlohmann::json r = cli_json("report --json " + stem + ".mtide");
    ASSERT_TRUE(r.is_object());
    for (const nlohmann::json& w : r["warnings"]) EXPECT_EQ(w.get<std::string>().find("no checkpoint"), std::string::npos) << w;
    ASSERT_TRUE(r["kept_range"].is_object()) << r.dump().substr(0, 2000);
    EXPECT_GT(r["kept_range"]["from_ns"].get<uint64_t>(), 0u);
    EXPECT_GT(r["total_allocations"].get<uint64_t>(), 1000u);
    EXPECT_TRUE(r["complete"].get<bool>());
    int rc = -1;
    const std::string gate = cli("check " + stem + ".mtide", &rc);
    EXPECT_EQ(rc, 0) << gate;
    EXPECT_EQ(gate.find("allocated twice"), std::string::npos) << gate;
  }
}

// The checkpoints of the kept set `stem`: the ones in it, and how many were written in all (the
// latest one's number).
struct Heads {
  std::vector<fmt::CheckpointHead> in_set;
  uint64_t written = 0;
  uint64_t largest = 0;  // the largest one's size
};
Heads heads_of(const std::string& stem) {
  Heads h;
  fmt::FileReader fr;
  if (!fr.open(stem + ".mtide").ok()) return h;
  h.in_set = fmt::find_checkpoints(fr);
  if (!h.in_set.empty()) h.written = h.in_set.back().seq;
  for (const fmt::CheckpointHead& x : h.in_set) h.largest = std::max(h.largest, x.offset - x.data_offset);
  return h;
}

// 300,000 live blocks replaced at random 6 M times, kept to 32 MiB (segments of 4 MiB; a
// checkpoint of the live blocks is about 2.3 MB): a checkpoint is written as often as the set
// needs one with events after it, not with each segment, and the set holds one and the events
// after it throughout. Twice, as the writer's passes fall where they may.
TEST(KeptTrace, ALargeLiveSetIsCheckpointedAsTheSetNeedsNotWithEverySegment) {
  constexpr uint64_t kKeep32 = 32u << 20;
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    const std::string stem = temp_dir() + "/heap" + std::to_string(run);
    Watch w;
    w.stem = stem;
    w.start();
    int st = -1;
    const std::string text = run_out(std::string(MT_WRAPPER) + " run --keep 32MiB -o " + stem + ".mtide -- " MT_BIG_HEAP
                                     " 300000 6000000 2>&1", &st);
    w.finish();
    ASSERT_EQ(st, 0) << text;
    EXPECT_NE(text.find("done 6300000"), std::string::npos) << text;
    EXPECT_EQ(text.find("cannot hold"), std::string::npos) << text;
    const auto segs = fmt::list_segments(stem);
    ASSERT_FALSE(segs.empty());
    const uint32_t written = segs.back().number;
    EXPECT_GE(written, 10u) << "the set did not rotate enough to prove anything";
    EXPECT_GT(segs.front().number, 1u);
    const Heads h = heads_of(stem);
    ASSERT_FALSE(h.in_set.empty());
    EXPECT_GT(h.largest, 1u << 20) << "the live set's checkpoint is smaller than the test assumes";
    // (With each segment it would be `written` or more.)
    EXPECT_LE(h.written * 2, written) << h.written << " checkpoints for " << written << " segments";
    EXPECT_LE(w.most, kKeep32 + kKeep32 / 8 + h.largest + (256u << 10));

    const nlohmann::json r = cli_json("report --json " + stem + ".mtide");
    ASSERT_TRUE(r.is_object());
    for (const nlohmann::json& x : r["warnings"]) EXPECT_EQ(x.get<std::string>().find("no checkpoint"), std::string::npos) << x;
    ASSERT_TRUE(r["kept_range"].is_object()) << r.dump().substr(0, 2000);
    // (At 300 bytes a replacement at most, 16 MiB of the set's events hold 50,000 of them.)
    EXPECT_GT(r["total_allocations"].get<uint64_t>(), 50000u);
    EXPECT_TRUE(r["complete"].get<bool>());
    int rc = -1;
    const std::string gate = cli("check " + stem + ".mtide", &rc);
    EXPECT_EQ(rc, 0) << gate;
  }
}

// The same live set kept to 4 MiB, which cannot hold two of its checkpoints: said once, and
// checkpoints are then written every checkpoint interval only (not a 2.3 MB one with every
// 512 KiB segment).
TEST(KeptTrace, ASetTooSmallForTwoCheckpointsSaysSoAndStopsWritingThemWithSegments) {
  const std::string stem = temp_dir() + "/small";
  int st = -1;
  const std::string text = run_out(std::string(MT_WRAPPER) + " run --keep 4MiB -o " + stem + ".mtide -- " MT_BIG_HEAP
                                   " 300000 3000000 2>&1", &st);
  ASSERT_EQ(st, 0) << text;
  const size_t said = text.find("cannot hold two checkpoints");
  ASSERT_NE(said, std::string::npos) << text;
  EXPECT_EQ(text.find("cannot hold two checkpoints", said + 1), std::string::npos) << text;
  const auto segs = fmt::list_segments(stem);
  ASSERT_FALSE(segs.empty());
  EXPECT_GE(segs.back().number, 20u);
  // The set may hold none; if it does, few were written (the first, and one a checkpoint
  // interval).
  const Heads h = heads_of(stem);
  EXPECT_LE(h.written, 4u);
  int rc = -1;
  const std::string out = cli("report " + stem + ".mtide", &rc);
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
}  // namespace memtide::test
