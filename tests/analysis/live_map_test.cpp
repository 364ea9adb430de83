// LiveMap (analysis/live_map.h): the replay's set of live blocks, against std::unordered_map,
// and the work of a lookup (directory probes, granules compared in a page) on allocators'
// address patterns.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>
#include <unordered_map>

#include "analysis/live_map.h"

namespace memtide::test {
namespace {

// `lm` holds exactly `ref`: the same size, every key found with its value, and listed once.
void expect_same_as(analysis::LiveMap<uint64_t>& lm, const std::unordered_map<uint64_t, uint64_t>& ref) {
  ASSERT_EQ(lm.size(), ref.size());
  for (const auto& [k, v] : ref) {
    const uint64_t* p = lm.find(k);
    ASSERT_TRUE(p) << k;
    EXPECT_EQ(*p, v);
  }
  std::size_t listed = 0;
  lm.for_each([&](uint64_t k, uint64_t v) {
    ++listed;
    auto it = ref.find(k);
    ASSERT_NE(it, ref.end());
    EXPECT_EQ(it->second, v);
  });
  EXPECT_EQ(listed, ref.size());
}

// Inserts, erases and finds `keys()` in a LiveMap and an unordered_map alike.
template <class Keys>
void churn_against_unordered_map(Keys keys, int rounds, std::size_t incremental_slots = std::size_t{1} << 20,
                                 std::size_t flat_max = analysis::LiveMap<uint64_t>::kFlatMax) {
  analysis::LiveMap<uint64_t> lm(incremental_slots, flat_max);
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 rng(7);
  for (int i = 0; i < rounds; ++i) {
    const uint64_t key = keys(rng);
    if (rng() % 3) {
      auto [v, fresh] = lm.insert(key);
      ASSERT_EQ(fresh, ref.count(key) == 0);
      *v = static_cast<uint64_t>(i);
      ref[key] = static_cast<uint64_t>(i);
    } else {
      uint64_t out = 0;
      const bool had = lm.erase(key, out);
      ASSERT_EQ(had, ref.count(key) == 1);
      if (had) {
        ASSERT_EQ(out, ref[key]);
        ref.erase(key);
      }
    }
  }
  expect_same_as(lm, ref);
}

TEST(LiveMap, AgreesWithUnorderedMapUnderRandomChurn) {
  // Collisions and reuse; includes key 0. In one table (the live set stays small), and by page
  // throughout.
  for (const std::size_t flat_max : {analysis::LiveMap<uint64_t>::kFlatMax, std::size_t{0}})
    churn_against_unordered_map([](std::mt19937_64& rng) { return (rng() % 5000) * 16; }, 200000, std::size_t{1} << 20,
                                flat_max);
}

// The blocks move to pages while a live set of kFlatMax blocks or more is swept (lookups stay on
// the recent pages), back to one table when frees and allocations land all over it, and back
// too when it shrinks below a quarter of kFlatMax; blocks at addresses that are not multiples of
// 16, and at 0 and 1, come along. Every step agrees with a map.
TEST(LiveMap, BlocksMoveBetweenOneTableAndPagesAsLookupsGo) {
  constexpr std::size_t kMax = 1000;
  analysis::LiveMap<uint64_t> lm(std::size_t{1} << 20, kMax, /*review_every=*/64);
  std::unordered_map<uint64_t, uint64_t> ref;
  std::vector<uint64_t> order;  // live keys, oldest first
  std::mt19937_64 rng(3);
  int moves = 0;
  bool was_paged = lm.paged();
  uint64_t next = 0, value = 0;
  auto put = [&](uint64_t k) {
    if (ref.count(k)) return;
    auto [v, fresh] = lm.insert(k);
    ASSERT_TRUE(fresh) << k;
    *v = ++value;
    ref[k] = value;
    order.push_back(k);
  };
  auto drop = [&](std::size_t i) {
    const uint64_t k = order[i];
    order.erase(order.begin() + static_cast<long>(i));
    uint64_t out = 0;
    ASSERT_TRUE(lm.erase(k, out)) << k;
    ASSERT_EQ(out, ref[k]);
    ASSERT_FALSE(lm.erase(k, out));
    ref.erase(k);
  };
  auto step = [&] { moves += lm.paged() != was_paged, was_paged = lm.paged(); };
  // A sweep: the next 48-byte chunk in address order (1 in 50 at an odd address), the oldest freed.
  auto sweep_key = [&]() -> uint64_t { return 0x555555560000ull + (next++) * 48 + (next % 50 == 0 ? 8 : 0); };
  put(0);
  put(1);
  for (int round = 0; round < 3; ++round) {
    while (ref.size() < 3 * kMax) put(sweep_key()), step();
    for (int i = 0; i < 20000; ++i) drop(0), put(sweep_key()), step();
    ASSERT_TRUE(lm.paged()) << round;
    EXPECT_GT(lm.pages(), 0u);
    expect_same_as(lm, ref);
    // Frees and allocations at random across 64 MiB.
    for (int i = 0; i < 20000; ++i) drop(rng() % order.size()), put(0x7f0000000000ull + (rng() % (1u << 22)) * 16), step();
    ASSERT_FALSE(lm.paged()) << round;
    EXPECT_EQ(lm.pages(), 0u);
    expect_same_as(lm, ref);
    // Swept again, then shrunk below a quarter of kMax.
    for (int i = 0; i < 20000; ++i) drop(0), put(sweep_key()), step();
    ASSERT_TRUE(lm.paged()) << round;
    while (ref.size() > kMax / 8) drop(0), step();
    ASSERT_FALSE(lm.paged()) << round;
    expect_same_as(lm, ref);
  }
  EXPECT_EQ(moves, 12);
}

// Addresses as allocators hand them out: dense runs in a few regions (slots follow addresses
// within a MiB), regions 64 MiB apart (thread arenas), and blocks spaced exactly a table's
// span apart, whose home slots coincide.
TEST(LiveMap, AgreesWithUnorderedMapOnAllocatorLikeAddresses) {
  const auto keys = [](std::mt19937_64& rng) -> uint64_t {
    const uint64_t arena = 0x7f0000000000ull + (rng() % 4) * (64ull << 20);
    switch (rng() % 3) {
      case 0: return arena + (rng() % 20000) * 32;                           // small chunks, packed
      case 1: return arena + (8ull << 20) + (rng() % 64) * (1024 * 16);      // 16 KiB apart
      default: return arena + (16ull << 20) + (rng() % 300) * (1ull << 20);  // a MiB apart
    }
  };
  churn_against_unordered_map(keys, 300000);
  churn_against_unordered_map(keys, 300000, std::size_t{1} << 20, /*flat_max=*/0);
}

// Growing incrementally from small tables on, the next table made ahead on another thread:
// inserts, erases and finds while the old table drains (keys in both tables, keys moved by an
// insert, keys erased from the old one) agree with a map, and so does the listing; the
// markers' addresses 0 and 1 are keys too.
TEST(LiveMap, IncrementalGrowthAgreesWithUnorderedMap) {
  churn_against_unordered_map([](std::mt19937_64& rng) { return (rng() % 60000) * 16 + (rng() % 50 == 0 ? 1 : 0); },
                              400000, /*incremental_slots=*/1024);
  // Adversarial addresses: a page each (the directory grows and drains), pages whose directory
  // slots coincide (a multiple of the table's span apart), a few blocks to a page and pages
  // filled past the dense threshold and emptied again, addresses that are not multiples of 16,
  // the top of the address space, 0 and 1.
  churn_against_unordered_map(
      [](std::mt19937_64& rng) -> uint64_t {
        switch (rng() % 7) {
          case 0: return (rng() % 40000) << 12;
          case 1: return 0x7f0000000000ull + (rng() % 64) * (uint64_t{1} << 32) + (rng() % 4) * 16;
          case 2: return 0x550000000000ull + (rng() % 3000) * 4096 + (rng() % 3) * 1024;
          case 3: return 0x560000000000ull + (rng() % 8) * 4096 + (rng() % 256) * 16;
          case 4: return 0x570000000000ull + (rng() % 5000) * 8 + 8;
          case 5: return ~uint64_t{0} - (rng() % 4096) * 16 - 15;
          default: return rng() % 2;
        }
      },
      600000, /*incremental_slots=*/1024);
  analysis::LiveMap<uint64_t> lm(1024);
  std::unordered_map<uint64_t, uint64_t> ref;
  bool drained_seen = false;
  for (uint64_t i = 0; i < 200000; ++i) {
    const uint64_t key = 0x7f0000000000ull + i * 16;
    *lm.insert(key).first = i;
    ref[key] = i;
    if (i % 3 == 0) {  // erase an older key: often one the old table still holds
      const uint64_t old_key = 0x7f0000000000ull + (i / 2) * 16;
      uint64_t out = 0;
      const bool had = lm.erase(old_key, out);
      ASSERT_EQ(had, ref.count(old_key) == 1) << i;
      if (had) {
        ASSERT_EQ(out, ref[old_key]);
        ref.erase(old_key);
      }
    }
    drained_seen |= lm.draining();
  }
  EXPECT_TRUE(drained_seen) << "the test never saw a table drain";
  expect_same_as(lm, ref);
}

// A live set of 700K blocks, one to a page: the directory outgrows the sparse regime and is
// mapped on its own (zero pages, huge pages where allowed); every block is found, erased and
// listed as in a map.
TEST(LiveMap, MillionsOfSlotsInAMappedTable) {
  analysis::LiveMap<uint64_t> lm(std::size_t{1} << 20, /*flat_max=*/0);
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 rng(11);
  for (uint64_t i = 0; i < 700000; ++i) {
    const uint64_t key = 0x7f0000000000ull + (i % 7) * (1ull << 30) + (i / 7) * 4096 + (rng() % 2) * 16;
    auto [v, fresh] = lm.insert(key);
    ASSERT_EQ(fresh, ref.count(key) == 0);
    *v = i;
    ref[key] = i;
  }
  EXPECT_EQ(lm.pages(), 700000u);
  EXPECT_GE(lm.memory_bytes(), std::size_t{64} << 20);  // the directory: 8M slots of 16 bytes
  ASSERT_EQ(lm.size(), ref.size());
  std::size_t erased = 0;
  for (auto it = ref.begin(); it != ref.end();) {
    uint64_t out = 0;
    if (it->first % 3 == 0) {
      ASSERT_TRUE(lm.erase(it->first, out));
      ASSERT_EQ(out, it->second);
      it = ref.erase(it);
      ++erased;
    } else {
      ++it;
    }
  }
  EXPECT_GT(erased, 100000u);
  expect_same_as(lm, ref);
  lm.clear();
  EXPECT_EQ(lm.size(), 0u);
  EXPECT_EQ(lm.find(0x7f0000000000ull), nullptr);
}

// A page's record through every size: filled granule by granule past the dense threshold,
// emptied in another order back to nothing, refilled; a map agrees at every step, and the
// memory taken follows the blocks (sparse records freed as they go, dense ones reused).
TEST(LiveMap, PagesGrowDenseAndShrinkBack) {
  analysis::LiveMap<uint64_t> lm(std::size_t{1} << 20, /*flat_max=*/0);
  std::unordered_map<uint64_t, uint64_t> ref;
  const std::size_t empty = lm.memory_bytes();
  std::mt19937_64 rng(5);
  for (int round = 0; round < 3; ++round) {
    // Every other granule first (32-byte chunks: a record of half the granules), then the rest.
    std::vector<uint64_t> order, rest;
    for (uint64_t g = 0; g < 256; ++g) (g % 2 == round % 2 ? order : rest).push_back(0x7f0000003000ull + g * 16);
    std::shuffle(order.begin(), order.end(), rng);
    std::shuffle(rest.begin(), rest.end(), rng);
    for (int half = 0; half < 2; ++half) {
      for (uint64_t k : half ? rest : order) {
        *lm.insert(k).first = k ^ round;
        ref[k] = k ^ round;
        ASSERT_EQ(*lm.find(k), k ^ round);
        ASSERT_FALSE(lm.insert(k).second);
      }
      expect_same_as(lm, ref);
      for (uint64_t k : rest)
        if (!half) EXPECT_EQ(lm.find(k), nullptr);
      // Dense (half, then whole): no sparse record left, and one chunk of the arena, whose freed
      // records are made again in the next rounds.
      EXPECT_EQ(lm.memory_bytes(), empty + analysis::DenseArena::kChunk);
    }
    order.insert(order.end(), rest.begin(), rest.end());
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i = 0; i < order.size(); ++i) {
      uint64_t out = 0;
      ASSERT_TRUE(lm.erase(order[i], out));
      ASSERT_EQ(out, ref[order[i]]);
      ref.erase(order[i]);
      ASSERT_FALSE(lm.erase(order[i], out));
      if (i % 17 == 0) expect_same_as(lm, ref);
    }
    EXPECT_EQ(lm.size(), 0u);
    EXPECT_EQ(lm.pages(), 0u);
    EXPECT_EQ(lm.memory_bytes(), empty + analysis::DenseArena::kChunk);
  }
  lm.clear();
  EXPECT_EQ(lm.memory_bytes(), empty);
}

// The work of a lookup stays bounded on the address patterns of real allocators, whatever the
// live set: the directory's probe runs stay short (a hash that kept neighbouring pages in
// neighbouring slots let dense runs merge into clusters as long as the live set, and every
// insert walked one: a quadratic replay), and a lookup compares few granules in its page (a
// page of many blocks is indexed by granule). Counted from the structure, not timed.
template <class Address>
void expect_short_probes(const char* allocator, Address address) {
  SCOPED_TRACE(allocator);
  analysis::LiveMap<uint64_t> lm(std::size_t{1} << 20, /*flat_max=*/0);
  for (const uint64_t n : {uint64_t{10000}, uint64_t{300000}, uint64_t{2400000}, uint64_t{6000000}}) {
    lm.clear();
    for (uint64_t i = 0; i < n; ++i) *lm.insert(address(i)).first = i;
    ASSERT_EQ(lm.size(), n);
    const auto st = lm.probe_stats();
    SCOPED_TRACE(testing::Message() << n << " blocks in " << lm.pages() << " pages: " << st.mean_probes
                                    << " probes per page, longest run " << st.longest_run << ", "
                                    << st.mean_scan << " loads of 16 granules per lookup in its page, at most " << st.longest_scan);
    EXPECT_LT(st.mean_probes, 4.0);  // a uniform hash: 2.5 at the table's highest load (3/4)
    EXPECT_LT(st.longest_run, 1000u);
    EXPECT_LT(st.mean_scan, 4.0);
    EXPECT_LE(st.longest_scan, 6u);  // a sparse page's most: 96 granules
  }
}

TEST(LiveMap, ShortProbesForGlibcsPackedChunks) {
  // 16-byte requests: 32-byte chunks one after another from the top of the heap.
  expect_short_probes("glibc", [](uint64_t i) { return 0x555555560000ull + i * 32; });
}

TEST(LiveMap, ShortProbesForJemallocsSlabs) {
  // 16-byte class: 16-byte regions filling 4 KiB slabs, slabs mostly adjacent in 2 MiB extents
  // of a 64 MiB-aligned arena.
  expect_short_probes("jemalloc", [](uint64_t i) {
    const uint64_t slab = i / 256, extent = slab / 512;
    return 0x7f0000000000ull + extent * (4ull << 20) + (slab % 512) * 4096 + (i % 256) * 16;
  });
}

TEST(LiveMap, ShortProbesForTcmallocSpans) {
  // 16-byte class: objects packed in 8 KiB spans, spans taken from the page heap in order.
  expect_short_probes("tcmalloc", [](uint64_t i) { return 0x560000000000ull + (i / 512) * 8192 + (i % 512) * 16; });
}

TEST(LiveMap, ShortProbesForMimallocPages) {
  // 16-byte blocks in 64 KiB pages, 64 pages to a 4 MiB-aligned segment (the first page holds the
  // segment's header and starts later).
  expect_short_probes("mimalloc", [](uint64_t i) {
    const uint64_t page = i / 4096, segment = page / 63;
    return 0x7e0000000000ull + segment * (4ull << 20) + (1 + page % 63) * 65536 + (i % 4096) * 16;
  });
}

TEST(LiveMap, ShortProbesForPageSizedBlocks) {
  // Large blocks a page or a MiB apart: the addresses' low bits are all zero.
  expect_short_probes("pages", [](uint64_t i) { return 0x7f1000000000ull + i * 4096; });
  expect_short_probes("MiBs", [](uint64_t i) { return 0x100000000000ull + i * (1ull << 20); });
}

TEST(LiveMap, ShortProbesForMediumBlocks) {
  // glibc's 48- and 96-byte chunks: 85 and 42 blocks to a page, sparse pages that stay sparse.
  expect_short_probes("48", [](uint64_t i) { return 0x555555560000ull + i * 48; });
  expect_short_probes("96", [](uint64_t i) { return 0x555555560000ull + i * 96; });
}

}  // namespace
}  // namespace memtide::test
