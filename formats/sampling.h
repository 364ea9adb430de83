// Sampled recording, the arithmetic the recorder and the readers share.
//
// A thread's allocated bytes are cut by a Poisson process of mean interval I bytes: the bytes
// between two sample points are exponentially distributed. An allocation of s bytes holds at
// least one point with probability p(s) = 1 - exp(-s / I), and is then recorded with the weight
// 1 / p(s): it stands for s / p(s) bytes and 1 / p(s) blocks. Summed over the recorded blocks,
// these weights are unbiased estimates of the true totals (the Horvitz-Thompson estimator; the
// same weights as the heap profilers of tcmalloc and jemalloc, see docs/FORMAT.md).
#pragma once

#include <cmath>
#include <cstdint>

namespace memtide::fmt {

inline constexpr uint64_t kMinSampleInterval = 1;
inline constexpr uint64_t kMaxSampleInterval = uint64_t{1} << 30;

// The probability that an allocation of `size` bytes is sampled at mean interval `interval`.
inline double sample_probability(uint64_t size, uint64_t interval) {
  if (interval == 0) return 1.0;
  return -std::expm1(-static_cast<double>(size) / static_cast<double>(interval));
}

// The bytes a sampled allocation of `size` stands for (at least `size`), as the trace's
// SampleWeight record carries it.
inline uint64_t sample_weight(uint64_t size, uint64_t interval) {
  if (size == 0) return 0;
  const double p = sample_probability(size, interval);
  const double w = static_cast<double>(size) / p;
  if (!(w < 1.8e19)) return UINT64_MAX;
  const auto r = static_cast<uint64_t>(std::llround(w));
  return r < size ? size : r;
}

// After a switch from exact to sampled recording, the blocks that were allocated in the exact
// period and are still live are themselves sampled by address: the recorder records the free of
// such a block only when its address is kept, and the readers, at the switch, drop the blocks
// whose address is not kept and give the kept ones kExactKeepFactor times their weight. A kept
// address is one whose mixed bits have their top log2(kExactKeepFactor) bits zero.
inline constexpr uint64_t kExactKeepFactor = 64;
inline uint64_t mix_address(uint64_t a) {
  a ^= a >> 33;
  a *= 0xff51afd7ed558ccdULL;
  a ^= a >> 33;
  a *= 0xc4ceb9fe1a85ec53ULL;
  a ^= a >> 33;
  return a;
}
inline bool kept_at_switch(uint64_t addr) { return (mix_address(addr) >> 58) == 0; }

}  // namespace memtide::fmt
