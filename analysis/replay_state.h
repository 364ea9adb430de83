// The replay's working state (replay.cpp): per domain the live counters and the per-stack
// work (with the lazy peak snapshot, see replay.cpp), the live blocks as the LiveMap holds
// them (a sampled one with the weight it stands for), per-thread counters and the anonymous
// mappings.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "analysis/model.h"
#include "analysis/stack_history.h"
#include "analysis/stacks.h"
#include "formats/check.h"
#include "formats/live_rules.h"
#include "formats/records.h"
#include "formats/sampling.h"

namespace memtide::analysis::detail {

// ---------------------------------------------------------------------------------------
// Working state
// ---------------------------------------------------------------------------------------

constexpr uint32_t kNoStack = UINT32_MAX;
constexpr uint32_t kMaxThreadSlots = 1u << 20;

struct StackWork {
  uint64_t cur_bytes = 0, cur_blocks = 0;
  uint64_t last_change = 0;  // sequence number of the last change of cur_*
  StackMetrics m;
};

using fmt::live::kMaxBlockBytes;  // larger sizes (hostile) are clamped

// 24 bytes (about as much in the LiveMap when its page is full): the one structure that grows
// with the live set.
struct LiveBlock {
  uint64_t bytes : 56 = 0;  // the block's size
  uint64_t api_ : 6 = 0;
  uint64_t sampled : 1 = 0;  // stands for more than itself: its weight is in Replayer::weights_
  uint64_t counted : 1 = 0;
  uint64_t time = 0;
  uint32_t stack = kNoStack;  // index into DomainState::work
  uint32_t thread = 0;
  fmt::Api api() const { return static_cast<fmt::Api>(api_); }
};
static_assert(sizeof(LiveBlock) == 24);

// What a live block stands for: itself (exact), or, sampled, an estimate of bytes and blocks.
struct Weighted {
  uint64_t bytes = 0, blocks = 1;
};

// The blocks a sampled block of `size` bytes with weight `weight` bytes stands for: weight / size,
// rounded down or up at random (by a hash of the block's address and time, so the same block
// always gives the same count) with the odds that keep the count unbiased.
inline uint64_t sampled_blocks(uint64_t weight, uint64_t size, uint64_t addr, uint64_t time) {
  if (size == 0 || weight <= size) return 1;
  const double c = static_cast<double>(weight) / static_cast<double>(size);
  const double whole = std::floor(c);
  const double u = static_cast<double>(fmt::mix_address(addr ^ (time * 0x9E3779B97F4A7C15ULL)) >> 11) * 0x1.0p-53;
  return static_cast<uint64_t>(whole) + (u < c - whole ? 1 : 0);
}

struct DomainState {
  bool per_stack = true;
  std::vector<uint32_t> dense;                   // raw stack id -> work index + 1
  std::unordered_map<uint64_t, uint32_t> sparse;  // for ids >= StackTable::kDenseLimit
  std::vector<StackWork> work;
  std::vector<uint64_t> raw;  // work index -> raw stack id
  Totals t;
  uint64_t live_bytes = 0, live_blocks = 0;  // counted blocks
  uint64_t seq = 0, peak_seq = 0;

  // dense's and work's data and dense's size, for the lookups of every event (a vector's size
  // is two loads and a subtraction); kept by index_slow.
  // Live bytes by stack over time (ReplayOptions::stack_history, heap only; stack_history.h):
  // the end of the interval in progress (UINT64_MAX: no history), and the stacks changed since
  // the last mark (a stack whose last change is below dirty_below is not yet among them).
  std::unique_ptr<HistoryRecorder> history;
  uint64_t next_mark = UINT64_MAX, dirty_below = 0;
  std::vector<uint32_t> dirty;

  const uint32_t* dense_data = nullptr;
  std::size_t dense_size = 0;
  StackWork* work_data = nullptr;
  StackWork& w(uint32_t s) { return work_data[s]; }

  // The work index of a stack, made on first use (kNoStack without per-stack statistics).
  uint32_t index(uint64_t stack) {
    if (stack < dense_size && dense_data[stack] != 0) [[likely]]
      return dense_data[stack] - 1;  // (dense stays empty without per-stack statistics)
    return index_slow(stack);
  }
  [[gnu::noinline]] uint32_t index_slow(uint64_t stack) {
    if (!per_stack) return kNoStack;
    uint32_t* slot;
    if (stack < StackTable::kDenseLimit) {
      if (stack >= dense.size()) dense.resize(std::max<std::size_t>(stack + 1, dense.size() * 3 / 2 + 64));
      slot = &dense[stack];
    } else {
      slot = &sparse[stack];
    }
    if (*slot == 0) {
      work.emplace_back();
      raw.push_back(stack);
      *slot = static_cast<uint32_t>(work.size());
    }
    const uint32_t s = *slot - 1;
    dense_data = dense.data();
    dense_size = dense.size();
    work_data = work.data();
    return s;
  }

  // Applies a change of counted live bytes/blocks of stack `s` at `time`.
  [[gnu::always_inline]] void change(uint32_t s, int64_t dbytes, int64_t dblocks, uint64_t time) {
    if (time >= next_mark) [[unlikely]]
      next_mark = history->mark(time, *this);
    ++seq;
    // A block released was counted in when it was made: the live counts never go below zero.
    MEMTIDE_CHECK(dbytes >= 0 || live_bytes >= static_cast<uint64_t>(-dbytes));
    MEMTIDE_CHECK(dblocks >= 0 || live_blocks >= static_cast<uint64_t>(-dblocks));
    if (s != kNoStack) {
      StackWork& sw = w(s);
      MEMTIDE_CHECK(dblocks >= 0 || sw.cur_blocks >= static_cast<uint64_t>(-dblocks));
      if (sw.last_change < dirty_below) [[unlikely]]
        dirty.push_back(s);
      if (sw.last_change <= peak_seq) {
        sw.m.peak_bytes = sw.cur_bytes;
        sw.m.peak_blocks = sw.cur_blocks;
      }
      sw.cur_bytes += static_cast<uint64_t>(dbytes);
      sw.cur_blocks += static_cast<uint64_t>(dblocks);
      sw.last_change = seq;
    }
    live_bytes += static_cast<uint64_t>(dbytes);
    live_blocks += static_cast<uint64_t>(dblocks);
    if (live_bytes > t.peak_bytes) {
      t.peak_bytes = live_bytes;
      t.peak_blocks = live_blocks;
      t.peak_time = time;
      peak_seq = seq;
    }
  }

  void snapshot_at() {
    t.at_bytes = live_bytes;
    t.at_blocks = live_blocks;
    for (StackWork& w : work) {
      w.m.at_bytes = w.cur_bytes;
      w.m.at_blocks = w.cur_blocks;
    }
  }
};

struct ThreadWork {
  uint64_t last_alloc = 0;  // address of the thread's latest heap allocation (temporaries)
  uint64_t allocs = 0, frees = 0;
};

struct MapRange {
  uint64_t end = 0;
  uint64_t mapping = 0;
};
struct Mapping {
  uint64_t live = 0;
  uint64_t time = 0;
  uint32_t stack = kNoStack;
  bool counted = false;
};

}  // namespace memtide::analysis::detail
