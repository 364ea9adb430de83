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

// leak_scan.cpp: the reachability scan at exit (--leak-scan). Stops the program's other threads
// (each parks in a signal handler, its registers saved on its own stack), calls `end`, which
// ends the recording (false: another thread ended it first, and nothing is scanned), scans the
// memory as it is at that one instant, then lets the threads go on. `sp`: the scanning thread's
// stack is read from there up. Returns what `end` returned.
bool leak_scan_at_exit(uintptr_t sp, bool (*end)());
// The stack pointer at the program's call of exit (or main's return, _exit, quick_exit): below
// it, the exiting thread's stack holds dead frames, which are no roots.
void note_exit_sp(uintptr_t sp);
uintptr_t exit_sp();
// From a recorder thread (the writer, attach's control thread): its stack holds copies of the
// program's addresses and is never a root.
void note_recorder_thread();
// A thread the program created (pthread_create's `thread`, not on a stack of the program's own):
// once it has exited, glibc keeps its stack for reuse, with its start argument and its result,
// and that memory is no root.
void note_thread_created(unsigned long thread);

}  // namespace memtide::rec
