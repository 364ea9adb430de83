// Following a file that another process is still appending to, and telling whether it is.
#include <gtest/gtest.h>

#include <fstream>

#include "formats/decoder.h"
#include "formats/merge.h"
#include "formats/reader.h"
#include "formats/writer.h"
#include "tests/formats/test_util.h"

namespace memtide {
namespace {

using namespace fmt;

void append_bytes(const std::string& path, const std::vector<uint8_t>& all, std::size_t from, std::size_t to) {
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f.write(reinterpret_cast<const char*>(all.data() + from), static_cast<std::streamsize>(to - from));
}

TEST(Follow, TruncatedTailIsReadOnceTheFileHasGrown) {
  std::vector<std::string> all_lines;
  const auto full = test::sample_trace(&all_lines);
  const auto offs = test::block_offsets(full);
  ASSERT_GE(offs.size(), 3u);
  const auto path = test::temp_path("grow.mtide");
  // First the header, one block and half of the second block's header.
  const std::size_t first_cut = offs[1] + kBlockHeaderSize / 2;
  test::write_bytes(path, std::vector<uint8_t>(full.begin(), full.begin() + static_cast<long>(first_cut)));

  FileReader r;
  ASSERT_TRUE(r.open(path).ok());
  RecordDecoder dec;
  test::LogVisitor v;
  ReadResult res = read_records(r, dec, v);
  EXPECT_EQ(res.status, ReadStatus::Truncated);
  EXPECT_EQ(res.offset, offs[1]);
  const std::size_t first_lines = v.lines.size();
  EXPECT_GT(first_lines, 0u);

  // The writer adds the rest of that block's header and part of its payload.
  const std::size_t second_cut = offs[1] + kBlockHeaderSize + 3;
  append_bytes(path, full, first_cut, second_cut);
  res = read_records(r, dec, v);
  EXPECT_EQ(res.status, ReadStatus::Truncated);
  EXPECT_EQ(res.offset, offs[1]);
  EXPECT_NE(res.message.find("payload"), std::string::npos);
  EXPECT_EQ(v.lines.size(), first_lines);

  // And then everything.
  append_bytes(path, full, second_cut, full.size());
  res = read_records(r, dec, v);
  EXPECT_TRUE(res.end_of_file()) << res.message;
  EXPECT_EQ(v.lines, all_lines);
}

TEST(Follow, MergerFollowsAGrowingFile) {
  const auto path = test::temp_path("grow-merge.mtide");
  TraceWriter w;
  w.open(path);
  FileReader r;
  ASSERT_TRUE(r.open(path).ok());
  EventMerger merger;
  test::LogVisitor v;
  Block b;
  uint64_t t = 0;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 100; ++i, ++t) w.append(1 + i % 3, Alloc{t, 0x1000 + t * 16, 16, 1, 0, Api::Malloc});
    w.watermark(t);
    ReadResult res;
    while ((res = r.next(b)).ok()) ASSERT_TRUE(merger.add_block(b, v).ok());
    EXPECT_TRUE(res.end_of_file());
    EXPECT_TRUE(r.writer_alive());
    // Everything before the previous watermark is out already.
    if (round > 0) {
      EXPECT_GE(v.lines.size(), static_cast<std::size_t>(round) * 100);
    }
  }
  w.close();
  EXPECT_FALSE(r.writer_alive());
  merger.finish(v);
  EXPECT_EQ(v.lines.size(), 5u * 100 + 5);  // allocs + watermarks
}

TEST(Liveness, LockHeldWhileWriterIsOpen) {
  const auto path = test::temp_path("live.mtide");
  {
    TraceWriter w;
    w.open(path);
    EXPECT_TRUE(is_being_written(path));
    FileReader r;
    ASSERT_TRUE(r.open(path).ok());
    EXPECT_TRUE(r.writer_alive());
    // Asking must not take the lock away or keep one: ask twice.
    EXPECT_TRUE(r.writer_alive());
    w.close();
    EXPECT_FALSE(r.writer_alive());
  }
  EXPECT_FALSE(is_being_written(path));
  EXPECT_FALSE(is_being_written(test::temp_path("missing")));
}

TEST(Liveness, UnlockedWriterIsNotAlive) {
  const auto path = test::temp_path("unlocked.mtide");
  TraceWriter w;
  TraceWriter::Options o;
  o.lock = false;
  w.open(path, o);
  EXPECT_FALSE(is_being_written(path));
}

}  // namespace
}  // namespace memtide
