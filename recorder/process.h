// The process (process.cpp): its ProcessInfo record and its counters (RSS, virtual size).
#pragma once

#include <cstdint>

#include "recorder/stream.h"

namespace memtide::rec {

void append_process_info(Stream* s);
// Reads the process counters (every counter interval) and appends a Counters record to `s` when
// they changed since the last one written (with the last unchanged reading before it), when
// kCounterHeartbeatNs passed without one, or when `write` (the trace's last sample). Returns
// whether they changed.
inline constexpr uint64_t kCounterHeartbeatNs = 1000000000;
bool sample_counters(Stream* s, bool write = false);
void process_counters_reset();

// leak_scan.cpp: the reachability scan at exit (--leak-scan). `sp`: the scanning thread's stack
// is read from there up.
void leak_scan(uintptr_t sp);

}  // namespace memtide::rec
