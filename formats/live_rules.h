// The rules by which a replay of a trace's events holds the live set, written once. Two replays
// follow them: the readers' (analysis/replay.cpp, replay_mmap.cpp) and the writer's, which keeps
// the live blocks for its checkpoints (recorder/checkpoint.cpp) and must hold, at each
// checkpoint, exactly what a reader's replay holds at that time. Each keeps its own tables; what
// happens to them on an event is decided here. Header-only and allocation-free (the recorder
// runs inside the program).
//
// The rules:
// - A heap block's size is held clamped to kMaxBlockBytes (a hostile size, or no allocation
//   that could succeed).
// - A sampled block stands for its weight, never less than itself (sample_weight).
// - An Alloc at an address that holds a block releases that block first (a free was lost: the
//   readers count it as an anomaly).
// - A mapping event of no length, or past the end of the address space, changes nothing
//   (maps_nothing).
// - A mapping replaces whatever was mapped where it lies (MAP_FIXED): [addr, addr + size) is
//   unmapped first.
// - An munmap of [lo, hi) leaves of each mapped range the pieces outside it (pieces_left).
// - mremap's old mapping is unmapped from its address to the end of the range that holds it;
//   nothing when no range holds it (mremap_old_end).
// - At a switch from exact to sampled recording, an exact block whose address is kept
//   (kept_at_switch) stays and stands for kExactKeepFactor times itself; the others leave the
//   live set, as no free (stays_at_switch, weight_after_switch). A switch back to exact
//   changes no block.
#pragma once

#include <algorithm>
#include <cstdint>

#include "formats/sampling.h"

namespace memtide::fmt::live {

inline constexpr uint64_t kMaxBlockBytes = (uint64_t{1} << 56) - 1;

inline constexpr uint64_t held_size(uint64_t size) { return std::min(size, kMaxBlockBytes); }

// The bytes a sampled block of `size` stands for; 0 for a block of exact recording.
inline constexpr uint64_t sample_weight(uint64_t weight, uint64_t size) {
  return weight ? std::min(std::max(weight, held_size(size)), kMaxBlockBytes) : 0;
}

inline constexpr bool maps_nothing(uint64_t addr, uint64_t length) { return length == 0 || addr + length < addr; }

// What an munmap of [lo, hi) leaves of the mapped range [start, end): up to two pieces, in
// address order, in `out`; returns how many.
struct Piece {
  uint64_t lo, hi;
};
inline int pieces_left(uint64_t start, uint64_t end, uint64_t lo, uint64_t hi, Piece out[2]) {
  if (hi <= start || lo >= end) {
    out[0] = {start, end};
    return 1;
  }
  int n = 0;
  if (lo > start) out[n++] = {start, lo};
  if (hi < end) out[n++] = {hi, end};
  return n;
}

// The end of the range mremap's old mapping at `addr` unmaps to, given the mapped range that
// starts at or before it ([start, end), `found` false when there is none); 0: nothing.
inline constexpr uint64_t mremap_old_end(bool found, uint64_t start, uint64_t end, uint64_t addr) {
  return found && start <= addr && addr < end ? end : 0;
}

// At a switch from exact to sampled recording: whether the exact block at `addr` stays, and the
// weight one of `size` that stays takes.
inline bool stays_at_switch(uint64_t addr) { return kept_at_switch(addr); }
inline constexpr uint64_t weight_after_switch(uint64_t size) { return size * kExactKeepFactor; }

}  // namespace memtide::fmt::live
