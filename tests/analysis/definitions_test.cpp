// DefinitionReader and embedded_symbol_modules (analysis/definitions.h): the stacks, modules and
// embedded symbols of a trace read without its events, by the block hints, on real files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <tuple>

#include "analysis/definitions.h"
#include "analysis/replay.h"
#include "formats/encoder.h"
#include "formats/writer.h"
#include "tests/trace_builder.h"

namespace memtide::analysis {
namespace {

// Removes its file when the test ends.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name)
      : path(testing::TempDir() + "/definitions_" + std::to_string(::getpid()) + "_" + name) {}
  ~TempFile() { ::unlink(path.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  operator const std::string&() const { return path; }
};

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::vector<uint8_t>& bytes, std::size_t n = SIZE_MAX) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(std::min(n, bytes.size())));
}

constexpr uint64_t kModule = 7;

// Three threads, 300,000 events in 4 KiB blocks, two new stack nodes per thread every round.
void write_trace(const std::string& path) {
  test::TraceBuilder::Options o;
  o.path = path;
  o.block_bytes = 4096;
  test::TraceBuilder b(o);
  b.module(1, kModule, "/lib/fake.so", 0x400000, 0, 0x10000, "\x01\x02");
  uint64_t t = 10, next_id = 1;
  for (uint64_t round = 0; round < 10; ++round) {
    for (uint32_t s = 1; s <= 3; ++s) {
      const uint64_t id = next_id;
      next_id += 2;
      b.stack(s, id, 0, {0x401000 + round * 16 + s, 0x402000 + round});
      for (uint64_t i = 0; i < 5000; ++i, t += 2) b.malloc(s, t, 0x10000 + i * 16, 32, id + 1).free(s, t + 1, 0x10000 + i * 16);
    }
    b.watermark(t);
  }
  b.end(t + 1);
}

using Nodes = std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>;  // id, parent, ip
Nodes nodes(const Model& m) {
  Nodes out;
  m.stack_table.for_each([&](StackId id, const StackTable::Node& n) { out.emplace_back(id.value, n.parent, n.ip); });
  std::sort(out.begin(), out.end());
  return out;
}

Nodes replayed_nodes(const std::string& path) {
  AnalyzeResult r = analyze_file(path);
  EXPECT_TRUE(r.ok()) << r.error;
  return r.ok() ? nodes(*r.model) : Nodes{};
}

TEST(Definitions, ReadOnlyTheFlaggedBlocksAndAgreeWithAReplay) {
  const TempFile path("hinted.mtide");
  write_trace(path);
  DefinitionReader d;
  ASSERT_EQ(d.open(path), "");
  EXPECT_TRUE(d.has_hints());
  const DefinitionReader::Progress p = d.advance();
  d.finish();
  EXPECT_FALSE(p.waiting);
  // The 30 blocks that hold stacks and the process stream's are read; the events' blocks
  // are stepped over.
  EXPECT_GT(p.blocks_skipped, 4 * p.blocks_read) << p.blocks_read << " read";
  const Model& m = d.model();
  EXPECT_TRUE(m.complete);
  EXPECT_EQ(m.stack_table.size(), 60u);
  EXPECT_EQ(nodes(m), replayed_nodes(path));
  ASSERT_EQ(m.modules.size(), 1u);
  EXPECT_EQ(m.modules[0].id.value, kModule);
  EXPECT_EQ(m.module_at(0x401005), &m.modules[0]);
}

TEST(Definitions, AFileWithoutHintsIsReadWhole) {
  const TempFile path("plain.mtide");
  write_trace(path);
  std::vector<uint8_t> bytes = slurp(path);
  fmt::encode_file_header(bytes.data(), 0);  // as a writer that flags nothing would
  spit(path, bytes);
  DefinitionReader d;
  ASSERT_EQ(d.open(path), "");
  EXPECT_FALSE(d.has_hints());
  const DefinitionReader::Progress p = d.advance();
  d.finish();
  EXPECT_EQ(p.blocks_skipped, 0u);
  EXPECT_EQ(nodes(d.model()), replayed_nodes(path));
}

TEST(Definitions, FollowsAFileAsItGrows) {
  const TempFile full("full.mtide"), growing("growing.mtide");
  write_trace(full);
  const std::vector<uint8_t> bytes = slurp(full);
  spit(growing, bytes, bytes.size() / 2 + 7);  // ends inside a block
  DefinitionReader d;
  ASSERT_EQ(d.open(growing), "");
  EXPECT_TRUE(d.advance().waiting);
  const std::size_t half = d.model().stack_table.size();
  EXPECT_GT(half, 0u);
  EXPECT_LT(half, 60u);
  EXPECT_FALSE(d.model().complete);
  spit(growing, bytes);
  EXPECT_FALSE(d.advance().waiting);
  d.finish();
  EXPECT_TRUE(d.model().complete);
  EXPECT_FALSE(d.model().truncated);
  EXPECT_EQ(nodes(d.model()), replayed_nodes(full));
}

// A bad block is skipped with one warning, however often a follower asks again, and the
// reading goes on after it.
TEST(Definitions, ABadBlockIsSkippedWithOneWarning) {
  const TempFile path("bad.mtide");
  write_trace(path);
  // Flips the byte `from_end` bytes before the end (inside a block, whose checksum then fails), reads
  // the file as a follower asking five times would.
  auto corrupt_and_read = [&](DefinitionReader& d, std::size_t from_end) {
    std::vector<uint8_t> bytes = slurp(path);
    bytes[bytes.size() - from_end] ^= 0xff;
    spit(path, bytes);
    ASSERT_EQ(d.open(path), "");
    for (int i = 0; i < 5; ++i) d.advance();
    d.finish();
  };
  auto skipped = [](const Model& m) {
    std::size_t n = 0;
    for (const std::string& w : m.warnings) n += w.find("skipped") != std::string::npos;
    return n;
  };
  DefinitionReader d;
  corrupt_and_read(d, slurp(path).size() / 2);
  EXPECT_TRUE(d.model().corrupt);
  EXPECT_TRUE(d.model().complete) << "the blocks after the bad one are read";
  EXPECT_EQ(skipped(d.model()), 1u);
  // The last block bad too: nothing to go on with, and asked again and again.
  DefinitionReader tail;
  corrupt_and_read(tail, 10);
  EXPECT_FALSE(tail.model().complete);
  EXPECT_EQ(skipped(tail.model()), 2u) << "the one in the middle and the last, once each";
}

TEST(Definitions, ModulesWithEmbeddedSymbols) {
  const TempFile path("symbols.mtide");
  write_trace(path);
  EXPECT_TRUE(embedded_symbol_modules(path).empty());
  {
    fmt::TraceWriter w;
    w.open_append(path, {});
    const std::vector<fmt::SymbolEntry> e = {{0x1010, "f", "f.c", 3, 0}, {0x2000, {}, {}, 0, 0}};
    w.append_symbols(0, kModule, e);
    w.close();
  }
  EXPECT_EQ(embedded_symbol_modules(path), std::set<uint64_t>{kModule});
  DefinitionReader d;
  ASSERT_EQ(d.open(path), "");
  d.advance();
  d.finish();
  ASSERT_EQ(d.model().embedded.count(kModule), 1u);
  EXPECT_EQ(d.model().embedded.at(kModule).size(), 2u);
  // Without hints the Symbols blocks cannot be found without reading everything: none reported.
  std::vector<uint8_t> bytes = slurp(path);
  fmt::encode_file_header(bytes.data(), 0);
  spit(path, bytes);
  EXPECT_TRUE(embedded_symbol_modules(path).empty());
}

}  // namespace
}  // namespace memtide::analysis
