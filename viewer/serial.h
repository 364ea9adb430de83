// Serial numbers for published view data. A view remembers which data its cached results
// (layouts, sorted orders) were made from by serial, never by address: a new object may be
// allocated where a freed one was.
#pragma once

#include <atomic>
#include <cstdint>

namespace memtide::viewer {

inline uint64_t next_serial() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace memtide::viewer
