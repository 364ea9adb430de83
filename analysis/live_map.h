// LiveMap: the set of live blocks keyed by address, the one structure of the replay whose size
// follows the program's live set. Blocks are kept by page (4 KiB of address): a directory maps
// each page that holds live blocks to its record, and the record holds that page's blocks by
// their 16-byte granule. A replay that sweeps a large live set in address order (frees of the
// oldest blocks, each address handed back to the next allocation) then reads each record many
// times in a row and the records one after another, where a table hashed by address costs a
// cache miss every few events once it outgrows the caches (bench/README.md, "Reader scaling").
//
// A record is sparse or dense. Sparse: a granule byte and a value per block, unordered (an
// erase moves the last block into the hole); a lookup compares the granules 16 at a time.
// Its room grows 1, 2, 4 ... 64, 96 and halves when 1/4 full. Past 96 blocks the page is
// dense: a bitmap and a value for each of its 256 granules (or, when its blocks were all at an
// odd or all at an even granule, as glibc's 32-byte chunks are, for each of those 128), indexed
// directly (6 or 3 KiB, from DenseArena: live_arena.h); below 48 blocks it is sparse again. So
// a lookup's work in its page is bounded (6 loads of granules at most) whatever the layout, and
// a block costs 24-26 bytes in a full page, and 48 (plus a directory slot) alone on its page.
//
// The directory is a HashLiveMap (live_hash.h) of page numbers: open addressing, 16-byte slots,
// growing incrementally with its next table made on a thread of its own, so that no growth
// step stalls a viewer following a live trace (the records never move as it grows). Its slots
// are placed 8 consecutive pages to a group. The pages of the last lookups are remembered (256,
// by page number): a sweep, or frees on one page and allocations on another, mostly skip it.
//
// Addresses that are not multiples of 16 (none from the allocators this replays; hostile traces)
// are kept in a HashLiveMap of their own, with the addresses 0 and 1.
//
// Pages pay off only when lookups stay on the recent pages. A program that frees and allocates
// all over its live set (a cache evicting at random) makes a page cost a directory lookup, then
// the record's granules and its value, each a cache miss that the replay's prefetch (of the
// directory slot) does not hide; one hash table of blocks costs one, prefetched (bench/README.md,
// "Random frees", has both forms on random frees and on sweeps). So the blocks are kept in one table (the one of the other addresses, keyed by address) until the
// live set reaches kFlatMax blocks while fewer than 1 in 20 lookups leave the recent pages;
// they go back to the table when more than 1 in 4 do at two reviews in a row, or when fewer
// than kFlatMax / 4 blocks are live. That share is counted in either form (in the table's, on
// the same array of recent page numbers) and looked at every max(kReviewEvery, live blocks)
// lookups, so that each move (work of the order of the blocks moved) follows at least as many
// lookups. The table costs more memory than pages (8 slots of 32 bytes per block up to 4 M
// slots, against 24-48 bytes).

#pragma once

#include <emmintrin.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "analysis/live_arena.h"
#include "analysis/live_hash.h"

namespace memtide::analysis {

template <class V>
class LiveMap {
  static_assert(std::is_trivially_copyable_v<V> && std::is_trivially_destructible_v<V>,
                "blocks are moved bytewise between records");

 public:
  static constexpr std::size_t kFlatMax = std::size_t{1} << 15;
  static constexpr std::size_t kReviewEvery = std::size_t{1} << 16;

  // Directories (and the table of other addresses) of `incremental_slots` slots or more grow
  // incrementally (live_hash.h). Live sets below `flat_max` blocks are kept in one table (0:
  // always by page); `review_every` lookups at least between looks at the share of lookups that
  // leave the recent pages.
  explicit LiveMap(std::size_t incremental_slots = std::size_t{1} << 20, std::size_t flat_max = kFlatMax,
                   std::size_t review_every = kReviewEvery)
      : dir_(incremental_slots), odd_(incremental_slots), flat_max_(flat_max), review_every_(review_every),
        next_review_(review_every), paged_(flat_max == 0) {}
  LiveMap(const LiveMap&) = delete;
  LiveMap& operator=(const LiveMap&) = delete;
  ~LiveMap() { free_pages(); }

  std::size_t size() const { return size_ + odd_.size(); }
  std::size_t pages() const { return dir_.size(); }
  // The directory's slots, the table's of other addresses, the sparse records' (as malloc's
  // chunks) and the dense records' arena.
  std::size_t memory_bytes() const { return dir_.memory_bytes() + odd_.memory_bytes() + page_bytes_ + dense_.bytes(); }
  bool draining() const { return dir_.draining() || odd_.draining(); }
  // Whether the blocks are kept by page (false: all in one table).
  bool paged() const { return paged_; }

  // Inserts or finds `key`. Returns the value and whether it was inserted (false: it existed);
  // the value of an inserted key is for the caller to write.
  [[gnu::always_inline]] std::pair<V*, bool> insert(uint64_t key) {
    if (lookups_ >= next_review_) [[unlikely]] review();
    if (!paged_) {
      note_page(key);
      return odd_.insert(key);
    }
    if (key & 15) [[unlikely]] return odd_.insert(key);
    const unsigned g = granule(key);
    Page* p = page_of(key >> 12);
    if (p && p->cap == kDense && in_stride(p, g)) [[likely]] {
      const unsigned i = g >> stride(p);
      V* v = &dense_values(p)[i];
      uint64_t& w = dense_bits(p)[i >> 6];
      const uint64_t bit = uint64_t{1} << (i & 63);
      if (w & bit) return {v, false};
      w |= bit;
      ++p->count;
      ++size_;
      return {v, true};
    }
    return insert_sparse(key, p);
  }

  V* find(uint64_t key) {
    if (!paged_ || (key & 15)) return odd_.find(key);
    Page* p = page_of(key >> 12);
    return p ? find_in(p, granule(key)) : nullptr;
  }

  // Removes `key` and stores its value in `out`. False when absent.
  [[gnu::always_inline]] bool erase(uint64_t key, V& out) {
    if (lookups_ >= next_review_) [[unlikely]] review();
    if (!paged_) {
      note_page(key);
      return odd_.erase(key, out);
    }
    if (key & 15) [[unlikely]] return odd_.erase(key, out);
    if (!erase_paged(key, out)) return false;
    if (size_ < flat_max_ / 4) [[unlikely]] to_flat();
    return true;
  }

  // Asks for the cache lines of `key`'s page: its directory slot, or, when it is the page of
  // the last lookup, its block.
  [[gnu::always_inline]] void prefetch(uint64_t key) const {
    if (!paged_) return odd_.prefetch(key);
    const Recent& r = recent_[(key >> 12) % kRecent];
    if (r.page == key >> 12 && r.rec && r.rec->cap == kDense)
      __builtin_prefetch(&dense_values(r.rec)[granule(key) >> stride(r.rec)]);
    else dir_.prefetch(dir_key(key >> 12));
  }

  template <class F>
  void for_each(F&& f) const {
    odd_.for_each(f);
    dir_.for_each([&](uint64_t dk, Page* const& p) {
      const uint64_t base = ((dk >> 4) - 1) << 12;
      for_each_in(p, [&](unsigned g, const V& v) { f(base + (uint64_t{g} << 4), v); });
    });
  }

  // The work of a lookup, from the structure alone (the tests bound it for allocators' address
  // patterns): the directory's mean probes per page and longest run of occupied slots
  // (live_hash.h), and the mean number of loads a lookup of a live block makes in its page (1
  // in a dense page; in a sparse one, the 16-granule compares up to its own), with the most.
  // (Of the pages only: a live set kept in one table has none.)
  struct ProbeStats {
    double mean_probes = 0;
    std::size_t longest_run = 0;
    double mean_scan = 0;
    std::size_t longest_scan = 0;
  };
  ProbeStats probe_stats() const {
    const auto d = dir_.probe_stats();
    ProbeStats st{d.mean_probes, d.longest_run, 0, 0};
    std::size_t scanned = 0;
    if (size_) st.longest_scan = 1;
    dir_.for_each([&](uint64_t, Page* const& p) {
      const std::size_t n = p->count;
      if (p->cap == kDense) return void(scanned += n);
      for (std::size_t i = 0; i < n; ++i) scanned += i / 16 + 1;
      st.longest_scan = std::max(st.longest_scan, (n + 15) / 16);
    });
    if (size_) st.mean_scan = static_cast<double>(scanned) / static_cast<double>(size_);
    return st;
  }

  void clear() {
    free_pages();
    dir_.clear();
    odd_.clear();
    size_ = page_bytes_ = 0;
    paged_ = flat_max_ == 0;
    lookups_ = misses_ = 0;
    next_review_ = review_every_;
    scattered_ = 0;
  }

 private:
  // Erases a block whose address is a multiple of 16 from its page.
  [[gnu::always_inline]] bool erase_paged(uint64_t key, V& out) {
    const unsigned g = granule(key);
    Page* p = page_of(key >> 12);
    if (!p) return false;
    if (p->cap == kDense) [[likely]] {
      if (!in_stride(p, g)) return false;
      const unsigned i = g >> stride(p);
      uint64_t& w = dense_bits(p)[i >> 6];
      const uint64_t bit = uint64_t{1} << (i & 63);
      if (!(w & bit)) return false;
      out = dense_values(p)[i];
      w &= ~bit;
      --size_;
      if (--p->count < kSparseBelow) [[unlikely]] to_sparse(key >> 12, p);
      return true;
    }
    return erase_sparse(key, p, out);
  }

  // A page's record: a header, then (sparse) `cap` granules rounded up to a whole number of
  // 16-byte loads past the header's 4 and `cap` values, or (dense) the bitmap and a value for
  // each granule of its stride: every granule, or (stride 1) every other one, of the phase its
  // blocks had when it became dense (glibc's chunks are 32 bytes apart: half the record).
  struct Page {
    uint16_t count;  // live blocks
    uint16_t cap;    // sparse: room for blocks; kDense
    uint8_t first_granules[4];  // dense: the stride (0 or 1) and the phase
  };
  static constexpr uint16_t kDense = 0xffff;
  static constexpr unsigned kMaxSparse = 96;    // more blocks make the page dense
  static constexpr unsigned kSparseBelow = 48;  // fewer make a dense page sparse again

  static unsigned granule(uint64_t key) { return static_cast<unsigned>(key >> 4) & 255; }
  // Consecutive pages are consecutive multiples of 16 (8 to a group of directory slots);
  // never 0 or 1.
  static uint64_t dir_key(uint64_t page) { return (page + 1) << 4; }

  static std::size_t granule_bytes(unsigned cap) { return cap <= 4 ? 4 : (cap + 15) / 16 * 16; }
  static std::size_t values_offset(unsigned cap) { return (4 + granule_bytes(cap) + alignof(V) - 1) / alignof(V) * alignof(V); }
  static std::size_t sparse_bytes(unsigned cap) { return values_offset(cap) + cap * sizeof(V); }
  static constexpr std::size_t kBitsOffset = 8;
  static constexpr std::size_t kDenseValues = (kBitsOffset + 32 + alignof(V) - 1) / alignof(V) * alignof(V);
  // What malloc takes for `n` bytes (glibc: 8 bytes of header, 16-byte chunks).
  static std::size_t chunk(std::size_t n) { return std::max<std::size_t>(32, (n + 8 + 15) / 16 * 16); }

  static uint8_t* granules(Page* p) { return p->first_granules; }
  static V* sparse_values(Page* p) { return reinterpret_cast<V*>(reinterpret_cast<char*>(p) + values_offset(p->cap)); }
  static uint64_t* dense_bits(Page* p) { return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(p) + kBitsOffset); }
  static V* dense_values(Page* p) { return reinterpret_cast<V*>(reinterpret_cast<char*>(p) + kDenseValues); }
  static const uint64_t* dense_bits(const Page* p) { return dense_bits(const_cast<Page*>(p)); }
  static const V* dense_values(const Page* p) { return dense_values(const_cast<Page*>(p)); }
  static unsigned stride(const Page* p) { return p->first_granules[0]; }
  static bool in_stride(const Page* p, unsigned g) { return ((g ^ p->first_granules[1]) & stride(p)) == 0; }
  static unsigned granule_at(const Page* p, unsigned i) { return i << stride(p) | p->first_granules[1]; }
  static std::size_t dense_bytes(unsigned stride) { return kDenseValues + (256u >> stride) * sizeof(V); }

  // The index of granule `g` among a sparse page's blocks, or -1.
  static int scan(const Page* p, unsigned g) {
    const uint8_t* gs = p->first_granules;
    const __m128i needle = _mm_set1_epi8(static_cast<char>(g));
    for (unsigned i = 0; i < p->count; i += 16) {
      unsigned m = static_cast<unsigned>(
          _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gs + i)), needle)));
      if (p->count - i < 16) m &= (1u << (p->count - i)) - 1;
      if (m) return static_cast<int>(i + static_cast<unsigned>(std::countr_zero(m)));
    }
    return -1;
  }

  Page* page_of(uint64_t page) {
    Recent& r = recent_[page % kRecent];
    ++lookups_;
    if (r.page == page) [[likely]] return r.rec;
    ++misses_;
    Page* const* d = dir_.find(dir_key(page));
    r.page = page;
    return r.rec = d ? *d : nullptr;
  }

  V* find_in(Page* p, unsigned g) {
    if (p->cap == kDense) {
      if (!in_stride(p, g)) return nullptr;
      const unsigned i = g >> stride(p);
      return dense_bits(p)[i >> 6] >> (i & 63) & 1 ? &dense_values(p)[i] : nullptr;
    }
    const int i = scan(p, g);
    return i < 0 ? nullptr : &sparse_values(p)[i];
  }

  Page* allocate(std::size_t bytes) {
    page_bytes_ += chunk(bytes);
    return static_cast<Page*>(::operator new(bytes));
  }
  Page* allocate_dense(unsigned stride) { return static_cast<Page*>(dense_.allocate(stride, dense_bytes(stride))); }
  void deallocate(Page* p) {
    if (p->cap == kDense) return dense_.deallocate(stride(p), p);
    page_bytes_ -= chunk(sparse_bytes(p->cap));
    ::operator delete(p);
  }
  // `page`'s record is now `p` (made or moved).
  void repoint(uint64_t page, Page* p) {
    *dir_.find(dir_key(page)) = p;
    recent_[page % kRecent] = {page, p};
  }

  // A sparse record with room for `cap` blocks, holding the `n` of `gs` and `vs`.
  Page* make_sparse(unsigned cap, const uint8_t* gs, const V* vs, unsigned n) {
    Page* p = allocate(sparse_bytes(cap));
    p->count = static_cast<uint16_t>(n);
    p->cap = static_cast<uint16_t>(cap);
    if (n) {
      std::memcpy(granules(p), gs, n);
      std::memcpy(static_cast<void*>(sparse_values(p)), vs, n * sizeof(V));
    }
    return p;
  }

  // An insert into a sparse page, or a page without a record (`p` null).
  [[gnu::noinline]] std::pair<V*, bool> insert_sparse(uint64_t key, Page* p) {
    const uint64_t page = key >> 12;
    const unsigned g = granule(key);
    if (p && p->cap == kDense) {  // a granule out of the page's stride
      to_dense(page, p);
      return insert(key);
    }
    if (!p) {
      p = make_sparse(1, nullptr, nullptr, 0);
      *dir_.insert(dir_key(page)).first = p;
      recent_[page % kRecent] = {page, p};
    } else {
      const int i = scan(p, g);
      if (i >= 0) return {&sparse_values(p)[i], false};
      if (p->count == p->cap) {
        if (p->cap == kMaxSparse) {
          to_dense(page, p);
          return insert(key);
        }
        Page* q = make_sparse(std::min(p->cap * 2u, kMaxSparse), granules(p), sparse_values(p), p->count);
        deallocate(p);
        repoint(page, q);
        p = q;
      }
    }
    const unsigned i = p->count++;
    granules(p)[i] = static_cast<uint8_t>(g);
    ++size_;
    return {&sparse_values(p)[i], true};
  }

  bool erase_sparse(uint64_t key, Page* p, V& out) {
    const int i = scan(p, granule(key));
    if (i < 0) return false;
    V* vs = sparse_values(p);
    out = vs[i];
    const unsigned last = --p->count;
    granules(p)[i] = granules(p)[last];
    vs[i] = vs[last];
    --size_;
    const uint64_t page = key >> 12;
    if (last == 0) {
      deallocate(p);
      Page* gone = nullptr;
      dir_.erase(dir_key(page), gone);
      recent_[page % kRecent] = {page, nullptr};
    } else if (p->cap > 1 && last * 4 <= p->cap) {
      Page* q = make_sparse(p->cap / 2u, granules(p), vs, last);
      deallocate(p);
      repoint(page, q);
    }
    return true;
  }

  // Makes `p`'s blocks a dense record: of stride 1 when they share a phase (a sparse page), else
  // of every granule.
  void to_dense(uint64_t page, Page* p) {
    unsigned phase = 0, mixed = 0;
    if (p->cap != kDense) {
      phase = granules(p)[0] & 1;
      for (unsigned i = 0; i < p->count; ++i) mixed |= (granules(p)[i] ^ phase) & 1;
    }
    const unsigned s = p->cap == kDense || mixed ? 0 : 1;
    Page* q = allocate_dense(s);
    q->count = p->count;
    q->cap = kDense;
    q->first_granules[0] = static_cast<uint8_t>(s);
    q->first_granules[1] = static_cast<uint8_t>(s ? phase : 0);
    uint64_t* bits = dense_bits(q);
    bits[0] = bits[1] = bits[2] = bits[3] = 0;
    for_each_in(p, [&](unsigned g, const V& v) {
      const unsigned i = g >> s;
      bits[i >> 6] |= uint64_t{1} << (i & 63);
      dense_values(q)[i] = v;
    });
    deallocate(p);
    repoint(page, q);
  }

  void to_sparse(uint64_t page, Page* p) {
    Page* q = make_sparse(kMaxSparse, nullptr, nullptr, 0);
    for_each_in(p, [&](unsigned g, const V& v) {
      granules(q)[q->count] = static_cast<uint8_t>(g);
      sparse_values(q)[q->count++] = v;
    });
    deallocate(p);
    repoint(page, q);
  }

  // f(granule, value) for each block of `p`.
  template <class F>
  static void for_each_in(const Page* p, F&& f) {
    if (p->cap != kDense) {
      for (unsigned i = 0; i < p->count; ++i) f(p->first_granules[i], sparse_values(const_cast<Page*>(p))[i]);
      return;
    }
    for (unsigned w = 0; w < 4; ++w)
      for (uint64_t m = dense_bits(p)[w]; m; m &= m - 1) {
        const unsigned i = w * 64 + static_cast<unsigned>(std::countr_zero(m));
        f(granule_at(p, i), dense_values(p)[i]);
      }
  }

  // Kept in one table: counts a lookup of `key`'s page as page_of would (recent_ holds page
  // numbers only then).
  [[gnu::always_inline]] void note_page(uint64_t key) {
    Recent& r = recent_[(key >> 12) % kRecent];
    ++lookups_;
    if (r.page != key >> 12) {
      ++misses_;
      r.page = key >> 12;
    }
  }

  // Whether the blocks are kept in the form that suits the lookups since the last review.
  [[gnu::noinline]] void review() {
    if (flat_max_ != 0) {
      if (!paged_ && size() >= flat_max_ && misses_ * 20 < lookups_) return to_pages();
      // Two reviews in a row, since moving back costs most (a table of 8 slots per block): a live
      // set freed in no particular order leaves the recent pages for a while, then is small.
      scattered_ = paged_ && misses_ * 4 > lookups_ ? scattered_ + 1 : 0;
      if (scattered_ >= 2) return to_flat();
    }
    restart_review();
  }
  void restart_review() {
    lookups_ = misses_ = 0;
    next_review_ = std::max(review_every_, size());
  }

  // The blocks of the one table, other than those at addresses not multiples of 16, to pages.
  [[gnu::noinline]] void to_pages() {
    std::vector<std::pair<uint64_t, V>> blocks;
    blocks.reserve(odd_.size());
    odd_.for_each([&](uint64_t k, const V& v) { blocks.emplace_back(k, v); });
    odd_.clear();
    for (Recent& r : recent_) r = {};
    paged_ = true;
    next_review_ = SIZE_MAX;  // (none while the blocks move)
    for (const auto& [k, v] : blocks) *insert(k).first = v;
    restart_review();
  }
  // Every block to the one table.
  [[gnu::noinline]] void to_flat() {
    std::vector<std::pair<uint64_t, V>> blocks;
    blocks.reserve(size());
    for_each([&](uint64_t k, const V& v) { blocks.emplace_back(k, v); });
    free_pages();
    dir_.clear();
    odd_.clear();
    size_ = page_bytes_ = 0;
    paged_ = false;
    scattered_ = 0;
    for (const auto& [k, v] : blocks) *odd_.insert(k).first = v;
    restart_review();
  }

  void free_pages() {
    dir_.for_each([&](uint64_t, Page* const& p) {
      if (p->cap != kDense) ::operator delete(p);
    });
    dense_.clear();
    for (Recent& r : recent_) r = {};
  }

  static constexpr uint64_t kNoPage = ~uint64_t{0};

  HashLiveMap<Page*> dir_;
  HashLiveMap<V> odd_;  // addresses that are not multiples of 16; every block while !paged_
  std::size_t flat_max_;
  std::size_t review_every_;
  // Lookups of a page (insert, erase; find by page) and those that left the recent pages, since
  // the last review, which is due at next_review_ lookups.
  std::size_t lookups_ = 0, misses_ = 0, next_review_;
  unsigned scattered_ = 0;  // reviews in a row that found the lookups scattered over the pages
  bool paged_;
  std::size_t size_ = 0;  // blocks in pages
  std::size_t page_bytes_ = 0;  // sparse records'
  DenseArena dense_;
  struct Recent {
    uint64_t page = kNoPage;
    Page* rec = nullptr;
  };
  // The pages of the last lookups and their records (null: none), by page number modulo
  // kRecent: a program that frees on one page and allocates on another (mimalloc's free lists),
  // or allocates from the pages of its allocator's size classes, finds them here (4 KiB: in L1).
  static constexpr unsigned kRecent = 256;
  Recent recent_[kRecent];
};

}  // namespace memtide::analysis
