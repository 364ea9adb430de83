// Replays the fuzz seed corpus (tests/corpus) through reader, decoder and merger in the
// ordinary build: every file, valid or broken, reads to a typed result without a crash.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/merge.h"
#include "tests/formats/test_util.h"

namespace memtide {
namespace {

using namespace fmt;

TEST(Corpus, EveryFileReadsToATypedResult) {
  const std::filesystem::path dir(MEMTIDE_CORPUS_DIR);
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  std::size_t files = 0, valid = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    ++files;
    const auto bytes = test::read_bytes(e.path().string());
    FileReader r;
    if (!r.open_memory(bytes).ok()) continue;
    std::vector<std::string> lines;
    const ReadResult a = test::decode_all(bytes, lines);
    ASSERT_TRUE(r.open_memory(bytes).ok());
    EventMerger m;
    test::LogVisitor v;
    const ReadResult b = read_merged(r, m, v);
    EXPECT_EQ(a.status, b.status) << e.path();
    EXPECT_FALSE(a.ok()) << e.path();
    if (a.end_of_file()) ++valid;
    // Same records either way (merge only reorders).
    std::sort(lines.begin(), lines.end());
    std::sort(v.lines.begin(), v.lines.end());
    if (a.end_of_file()) {
      EXPECT_EQ(lines, v.lines) << e.path();
    }
  }
  EXPECT_GE(files, 10u);
  EXPECT_GE(valid, 2u);
}

}  // namespace
}  // namespace memtide
