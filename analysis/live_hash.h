// HashLiveMap: a hash table of blocks keyed by address. LiveMap (live_map.h) keeps its
// directory of pages in one and the blocks whose addresses are not multiples of 16 in another.
// Open addressing with linear probing and backward-shift deletion (no tombstones, so a long run
// of malloc/free churn does not degrade it). Up to 4M slots the table is kept at most 1/8 full;
// larger tables fill up to 3/4.
//
// A key's home slot: each 128 consecutive keys (8 possible multiples of 16) map to 8
// neighbouring slots, placed by a multiplicative (Fibonacci) hash of the key / 128 (the
// product's top bits). Allocators hand out neighbouring addresses one after another, and
// linear probing with a hash that keeps long runs of neighbours together lets them merge into
// clusters whose length grows with the live set, so that every insert walks one: the replay
// became quadratic. Runs of 8 slots scattered by the Fibonacci hash stay short at any load this
// table reaches (mean probes per lookup under 4 at 3/4 full, as a uniform hash's 2.5, for every
// allocator's layout the tests try, LiveMap.ShortProbesFor*), while neighbours still share
// cache lines.
//
// Growing a large table (1M slots or more) is incremental: the new table takes every insert, and
// each insert while the old one drains moves the next kDrainStep of its slots over; lookups and
// erases that miss the new table look in the old one, whose erased or moved slots are marked
// (kMoved) rather than shifted. The new table itself is made ahead, on a thread of its own, once
// the old one is 3/4 of the way to its doubling: zeroing its hundreds of MiB of pages as the
// draining first touched them stalled the replay for 1.0 s at 6 M live blocks and 2.0 s at
// 12 M (a viewer following a recording, 2.6 and 4.4 s), and a doubling now costs the replay
// a few slots per event.
//
// The key 0 is the empty-slot marker and 1 the moved-slot marker; (hostile) blocks at those
// addresses live in side slots.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <new>
#include <system_error>
#include <type_traits>
#include <utility>

namespace memtide::analysis {

template <class V>
class HashLiveMap {
  static_assert(std::is_trivially_copyable_v<V> && std::is_trivially_destructible_v<V>,
                "slots are moved bytewise and large tables start as zero pages");

 public:
  struct Slot {
    uint64_t key;
    V value;
  };

  // Tables of `incremental_slots` slots or more grow incrementally (the top of the file).
  explicit HashLiveMap(std::size_t incremental_slots = kIncrementalSlots) : incremental_slots_(incremental_slots) {
    rehash(1024);
  }

  std::size_t size() const { return size_ + old_left_ + (side_used_[0] ? 1 : 0) + (side_used_[1] ? 1 : 0); }
  std::size_t capacity() const { return mask_ + 1; }
  std::size_t memory_bytes() const { return (capacity() + (old_ ? old_mask_ + 1 : 0)) * sizeof(Slot); }
  bool draining() const { return static_cast<bool>(old_); }

  // Inserts or finds `key`. Returns the value and whether it was inserted (false: it existed);
  // the value of an inserted key is for the caller to write.
  [[gnu::always_inline]] std::pair<V*, bool> insert(uint64_t key) {
    if (key <= kMoved) [[unlikely]] return side_insert(key);
    if (size_ + 1 > ahead_load_ || old_) [[unlikely]] return insert_slow(key);
    return insert_new(key);
  }

  V* find(uint64_t key) {
    if (key <= kMoved) [[unlikely]] return side_used_[key] ? &side_[key] : nullptr;
    for (std::size_t i = index(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == 0) break;
    }
    if (old_) [[unlikely]] {
      if (Slot* o = old_find(key)) return &o->value;
    }
    return nullptr;
  }

  // Removes `key` and stores its value in `out`. False when absent.
  [[gnu::always_inline]] bool erase(uint64_t key, V& out) {
    if (key <= kMoved) [[unlikely]] {
      if (!side_used_[key]) return false;
      out = side_[key];
      side_used_[key] = false;
      return true;
    }
    std::size_t i = index(key);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) break;
      if (slots_[i].key == 0) return old_ ? old_erase(key, out) : false;
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
    for (uint64_t k = 0; k <= kMoved; ++k)
      if (side_used_[k]) f(k, side_[k]);
    for (std::size_t i = 0; i <= mask_; ++i)
      if (slots_[i].key != 0) f(slots_[i].key, slots_[i].value);
    if (old_)
      for (std::size_t i = 0; i <= old_mask_; ++i)
        if (old_[i].key > kMoved) f(old_[i].key, old_[i].value);
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
    old_.release();
    size_ = old_left_ = 0;
    side_used_[0] = side_used_[1] = false;
    rehash(1024);
  }

 private:
  // The empty-slot and moved-slot markers (keys up to kMoved live in side slots).
  static constexpr uint64_t kMoved = 1;

  static std::size_t index_in(uint64_t key, std::size_t mask, unsigned shift) {
    // 128-byte groups of addresses, 8 slots each, placed by Fibonacci hashing (see the top of
    // the file).
    return static_cast<std::size_t>(((key >> 7) * 0x9E3779B97F4A7C15ull >> shift) + ((key >> 4) & 7)) & mask;
  }
  std::size_t index(uint64_t key) const { return index_in(key, mask_, shift_); }

  std::pair<V*, bool> side_insert(uint64_t key) {
    const bool fresh = !side_used_[key];
    side_used_[key] = true;
    if (fresh) side_[key] = V{};
    return {&side_[key], fresh};
  }

  // Inserts into the new table, which has room.
  [[gnu::always_inline]] std::pair<V*, bool> insert_new(uint64_t key) {
    for (std::size_t i = index(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return {&s.value, false};
      if (s.key == 0) {
        s.key = key;
        ++size_;
        return {&s.value, true};
      }
    }
  }

  // An insert that grows the table or meets one draining: moves the next slots of the old table
  // over, then a key still in the old table moves to the new one (found, not inserted).
  [[gnu::noinline]] std::pair<V*, bool> insert_slow(uint64_t key) {
    if (!old_) {
      if (size_ + 1 <= max_load_) {  // past ahead_load_ only
        make_next_ahead();
        return insert_new(key);
      }
      grow();
      if (!old_) return insert_new(key);
    }
    drain(kDrainStep);
    if (old_) {
      if (Slot* o = old_find(key)) {
        const V v = o->value;
        o->key = kMoved;
        --old_left_;
        auto r = insert_new(key);
        *r.first = v;
        release_drained();
        return {r.first, false};
      }
    }
    if (size_ + old_left_ + 1 > max_load_) {
      drain(SIZE_MAX);
      grow();
      if (old_) return insert_slow(key);
    }
    return insert_new(key);
  }

  Slot* old_find(uint64_t key) const {
    for (std::size_t i = index_in(key, old_mask_, old_shift_);; i = (i + 1) & old_mask_) {
      Slot& s = old_[i];
      if (s.key == key) return &s;
      if (s.key == 0) return nullptr;
    }
  }

  bool old_erase(uint64_t key, V& out) {
    Slot* o = old_find(key);
    if (!o) return false;
    out = o->value;
    o->key = kMoved;  // (not shifted: slots before the drain position would be passed over)
    --old_left_;
    release_drained();
    return true;
  }

  // Moves up to `n` slots of the old table into the new one.
  void drain(std::size_t n) {
    const std::size_t old_cap = old_mask_ + 1;
    const std::size_t end = n >= old_cap - old_pos_ ? old_cap : old_pos_ + n;
    for (; old_pos_ < end && old_left_; ++old_pos_) {
      Slot& o = old_[old_pos_];
      if (o.key <= kMoved) continue;
      std::size_t j = index(o.key);
      while (slots_[j].key != 0) j = (j + 1) & mask_;
      slots_[j] = o;
      o.key = kMoved;
      ++size_;
      --old_left_;
    }
    release_drained();
  }

  void release_drained() {
    if (old_ && old_left_ == 0) {
      old_.release();
      old_pos_ = 0;
    }
  }

  // Doubles the table: at once while it is small, else incrementally (the top of the file),
  // into the table made ahead when there is one.
  void grow() {
    const std::size_t cap = capacity() * 2;
    if (capacity() < incremental_slots_) {
      rehash(cap);
      return;
    }
    Table next;
    if (next_.valid()) {
      next = next_.get();
      if (next_cap_ != cap) next.release();
    }
    old_ = std::move(slots_);
    old_mask_ = mask_;
    old_shift_ = shift_;
    old_left_ = size_;
    old_pos_ = 0;
    size_ = 0;
    slots_ = next ? std::move(next) : Table::make(cap);
    set_capacity(cap);
  }

  // Once a large table is 3/4 of the way to its next doubling, its successor is made (mapped
  // and its pages written) on a thread of its own: zeroing a table of hundreds of MiB on the
  // replay's thread, as the draining first touches each page, stalled the replay for a second
  // or more at each doubling.
  void make_next_ahead() {
    if (next_.valid() || capacity() < incremental_slots_) return;
    next_cap_ = capacity() * 2;
    try {
      next_ = std::async(std::launch::async, [cap = next_cap_] { return Table::make(cap, /*touch=*/true); });
    } catch (const std::system_error&) {
      // No thread to be had: grow() makes the table itself when it is needed.
    }
  }

  void set_capacity(std::size_t cap) {
    mask_ = cap - 1;
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(cap));
    max_load_ = cap <= kSparseSlots ? cap / 8 : cap / 4 * 3;
    // (the successor of a large table is made from here on: make_next_ahead)
    ahead_load_ = cap < incremental_slots_ ? max_load_ : max_load_ / 4 * 3;
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
    // `touch`: writes every page now (the kernel zeroes each as it is first written), so that
    // the thread that makes the table pays for that rather than the one that fills it.
    static Table make(std::size_t cap, bool touch = false) {
      Table t;
      const std::size_t bytes = cap * sizeof(Slot);
      if (bytes >= kHugePage) {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        madvise(p, bytes, MADV_HUGEPAGE);  // (advice: refused or ignored, the table works the same)
        if (touch)
          for (std::size_t off = 0; off < bytes; off += 4096) static_cast<volatile char*>(p)[off] = 0;
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
    set_capacity(cap);
    size_ = 0;
    for (std::size_t i = 0; i < old_cap; ++i) {
      if (old[i].key <= kMoved) continue;
      std::size_t j = index(old[i].key);
      while (slots_[j].key != 0) j = (j + 1) & mask_;
      slots_[j] = old[i];
      ++size_;
    }
  }

  // Up to this many slots (128 MiB of 32-byte slots) the table is kept at most 1/8 full,
  // beyond it at most 3/4 full, so that a live set of millions of blocks costs less memory.
  static constexpr std::size_t kSparseSlots = std::size_t{1} << 22;

  // Tables of this many slots (32 MiB) or more grow incrementally; kDrainStep old slots move
  // over at each insert while one drains (enough to finish before the new table is full: it
  // starts at most half as full as it may grow).
  static constexpr std::size_t kIncrementalSlots = std::size_t{1} << 20;
  static constexpr std::size_t kDrainStep = 32;

  Table slots_;
  std::size_t max_load_ = 0, ahead_load_ = 0;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;  // keys in slots_
  const std::size_t incremental_slots_;
  // The table being drained (empty when none).
  Table old_;
  std::size_t old_mask_ = 0, old_pos_ = 0, old_left_ = 0;
  unsigned old_shift_ = 64;
  bool side_used_[2] = {false, false};
  V side_[2] = {};
  // The next table, being made ahead (make_next_ahead), and its capacity.
  std::future<Table> next_;
  std::size_t next_cap_ = 0;
};

}  // namespace memtide::analysis
