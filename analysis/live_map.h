// LiveMap: the set of live blocks keyed by address, the one structure of the replay whose size
// follows the program's live set. Open addressing with linear probing and backward-shift
// deletion (no tombstones, so a long run of malloc/free churn does not degrade it). Slots are
// 32 bytes. Up to 4M slots (128 MiB) the table is kept at most 1/8 full; larger tables (live
// sets of more than 512K blocks) fill up to 3/4 (43 to 85 bytes per live block).
//
// A block's home slot: each 128 bytes of the address space (8 possible 16-byte blocks) map to 8
// neighbouring slots, placed by a multiplicative (Fibonacci) hash of the address / 128 (the
// product's top bits). Allocators hand out neighbouring addresses one after another, densely
// packed (jemalloc's and mimalloc's 16-byte classes fill whole pages), and linear probing with
// a hash that keeps long runs of neighbours together lets them merge into clusters whose length
// grows with the live set, so that every insert walks one: the replay became quadratic. Runs of
// 8 slots scattered by the Fibonacci hash stay short at any load this table reaches (mean
// probes per lookup under 4 at 3/4 full, as a uniform hash's 2.5, for every allocator's layout
// the tests try, LiveMap.ShortProbesFor*),
// while a block's neighbours still share its cache lines: a replay that sweeps a large live set
// in address order (frees of the oldest blocks) takes 35-50% less time than with every address
// hashed on its own (bench/README.md, "Reader scaling"). The replay also prefetches each event's
// home slot ahead, which hides most of the remaining misses.
//
// The address 0 is the empty-slot marker; a (hostile) block at address 0 lives in a side slot.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace memtide::analysis {

template <class V>
class LiveMap {
  static_assert(std::is_trivially_copyable_v<V> && std::is_trivially_destructible_v<V>,
                "slots are moved bytewise and large tables start as zero pages");

 public:
  struct Slot {
    uint64_t key;
    V value;
  };

  LiveMap() { rehash(1024); }

  std::size_t size() const { return size_ + (zero_used_ ? 1 : 0); }
  std::size_t capacity() const { return mask_ + 1; }
  std::size_t memory_bytes() const { return capacity() * sizeof(Slot); }

  // Inserts or finds `key`. Returns the value and whether it was inserted (false: it existed);
  // the value of an inserted key is for the caller to write.
  [[gnu::always_inline]] std::pair<V*, bool> insert(uint64_t key) {
    if (key == 0) {
      const bool fresh = !zero_used_;
      zero_used_ = true;
      if (fresh) zero_ = V{};
      return {&zero_, fresh};
    }
    if (size_ + 1 > max_load_) rehash(capacity() * 2);
    std::size_t i = index(key);
    for (;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return {&s.value, false};
      if (s.key == 0) {
        s.key = key;
        ++size_;
        return {&s.value, true};
      }
    }
  }

  V* find(uint64_t key) {
    if (key == 0) return zero_used_ ? &zero_ : nullptr;
    for (std::size_t i = index(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == 0) return nullptr;
    }
  }

  // Removes `key` and stores its value in `out`. False when absent.
  [[gnu::always_inline]] bool erase(uint64_t key, V& out) {
    if (key == 0) {
      if (!zero_used_) return false;
      out = zero_;
      zero_used_ = false;
      return true;
    }
    std::size_t i = index(key);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) break;
      if (slots_[i].key == 0) return false;
    }
    out = slots_[i].value;
    // Backward shift: pull later members of the probe run into the hole.
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
      const std::size_t home = index(slots_[j].key);
      // Move j into the hole when its home is not in (hole, j] (cyclically).
      const bool between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!between) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].key = 0;
    --size_;
    return true;
  }

  // Asks for the cache line of `key`'s home slot (a lookup of it soon).
  [[gnu::always_inline]] void prefetch(uint64_t key) const { __builtin_prefetch(&slots_[index(key)]); }

  template <class F>
  void for_each(F&& f) const {
    if (zero_used_) f(uint64_t{0}, zero_);
    for (std::size_t i = 0; i <= mask_; ++i)
      if (slots_[i].key != 0) f(slots_[i].key, slots_[i].value);
  }

  // How far the live keys sit from their home slots: the mean number of slots a lookup of a
  // present key reads (1 = every key in its home slot), and the longest run of occupied slots.
  // Both follow from the table alone; the tests bound them for allocators' address patterns.
  struct ProbeStats {
    double mean_probes = 0;
    std::size_t longest_run = 0;
  };
  ProbeStats probe_stats() const {
    ProbeStats st;
    std::size_t probes = 0, run = 0, first_run = 0;
    bool wrapped_run = true;  // the run that starts at slot 0 may continue from the table's end
    for (std::size_t i = 0; i <= mask_; ++i) {
      const uint64_t k = slots_[i].key;
      if (k == 0) {
        if (wrapped_run) first_run = run, wrapped_run = false;
        run = 0;
        continue;
      }
      probes += ((i - index(k)) & mask_) + 1;
      st.longest_run = std::max(st.longest_run, ++run);
    }
    if (!wrapped_run) st.longest_run = std::max(st.longest_run, run + first_run);
    if (size_) st.mean_probes = static_cast<double>(probes) / static_cast<double>(size_);
    return st;
  }

  void clear() {
    slots_.release();  // (rehash then has no old slots to carry over)
    size_ = 0;
    zero_used_ = false;
    rehash(1024);
  }

 private:
  std::size_t index(uint64_t key) const {
    // 128-byte groups of addresses, 8 slots each, placed by Fibonacci hashing (see the top of
    // the file).
    return static_cast<std::size_t>(((key >> 7) * 0x9E3779B97F4A7C15ull >> shift_) + ((key >> 4) & 7)) & mask_;
  }

  // The slot array. Tables of 2 MiB or more are mapped on their own, zeroed by the kernel and
  // in huge pages where the system allows them (madvise): a lookup in a table of millions of
  // slots otherwise misses the TLB as well as the cache (a report of python3 on malloc, 1.0 M
  // live blocks in a 256 MiB table: see bench/README.md).
  struct Table {
    Slot* slots = nullptr;
    std::size_t bytes = 0;  // mapped bytes; 0: allocated with new[]
    Table() = default;
    Table(const Table&) = delete;
    Table& operator=(const Table&) = delete;
    Table(Table&& o) noexcept : slots(std::exchange(o.slots, nullptr)), bytes(std::exchange(o.bytes, 0)) {}
    Table& operator=(Table&& o) noexcept {
      if (this != &o) {
        release();
        slots = std::exchange(o.slots, nullptr);
        bytes = std::exchange(o.bytes, 0);
      }
      return *this;
    }
    ~Table() { release(); }
    void release() {
      if (bytes) munmap(slots, bytes);
      else delete[] slots;
      slots = nullptr;
      bytes = 0;
    }
    static Table make(std::size_t cap) {
      Table t;
      const std::size_t bytes = cap * sizeof(Slot);
      if (bytes >= kHugePage) {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        madvise(p, bytes, MADV_HUGEPAGE);  // (advice: refused or ignored, the table works the same)
        t.slots = static_cast<Slot*>(p);
        t.bytes = bytes;
        return t;
      }
      t.slots = new Slot[cap];
      for (std::size_t i = 0; i < cap; ++i) t.slots[i].key = 0;
      return t;
    }
    Slot& operator[](std::size_t i) const { return slots[i]; }
    explicit operator bool() const { return slots != nullptr; }
  };
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  void rehash(std::size_t cap) {
    Table old = std::move(slots_);
    const std::size_t old_cap = old ? mask_ + 1 : 0;
    slots_ = Table::make(cap);
    mask_ = cap - 1;
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(cap));
    max_load_ = cap <= kSparseSlots ? cap / 8 : cap / 4 * 3;
    size_ = 0;
    for (std::size_t i = 0; i < old_cap; ++i) {
      if (old[i].key == 0) continue;
      std::size_t j = index(old[i].key);
      while (slots_[j].key != 0) j = (j + 1) & mask_;
      slots_[j] = old[i];
      ++size_;
    }
  }

  // Up to this many slots (128 MiB of 32-byte slots) the table is kept at most 1/8 full,
  // beyond it at most 3/4 full, so that a live set of millions of blocks costs less memory.
  static constexpr std::size_t kSparseSlots = std::size_t{1} << 22;

  Table slots_;
  std::size_t max_load_ = 0;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
  bool zero_used_ = false;
  V zero_{};
};

}  // namespace memtide::analysis
