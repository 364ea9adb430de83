// Frame times: a ring buffer of the last frames' durations, with percentiles, kept apart for
// frames drawn while the loader was busy and after it finished.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace memtide::viewer {

class FrameRing {
 public:
  explicit FrameRing(std::size_t capacity = 4096) : buf_(capacity) {}
  void add(double ms);
  std::size_t size() const { return count_ < buf_.size() ? count_ : buf_.size(); }
  uint64_t total() const { return count_; }
  // Percentile (0..100) of the frames in the buffer; 0 when empty.
  double percentile(double p) const;
  double max() const;
  double last() const { return count_ ? buf_[(count_ - 1) % buf_.size()] : 0; }

 private:
  std::vector<double> buf_;
  uint64_t count_ = 0;
};

struct FrameStats {
  FrameRing all{512};   // the latest frames, for the on-screen overlay
  FrameRing loading{1 << 16}, loaded{1 << 16};
  void add(double ms, bool busy) {
    all.add(ms);
    (busy ? loading : loaded).add(ms);
  }
  // "loading: 240 frames, p50 3.1 ms, p99 9.8 ms, max 12.0 ms; loaded: ..."
  std::string report() const;
};

}  // namespace memtide::viewer
