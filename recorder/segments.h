// The tables a segment of a kept trace starts with (segments.cpp; `memtide run --keep`,
// docs/FORMAT.md section 15): the writer thread keeps a copy of the records a reader needs to
// read a segment without the ones before it, and writes them as the segment's prologue.
// Everything here runs on the writer thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memtide::rec {

// A block of `stream` about to be written (not a checkpoint's, not a prologue's): keeps its
// ProcessInfo, ModuleLoads (forgetting the modules it unloads) and StackDefs.
void segment_tables_note(uint32_t stream, uint64_t base_time, uint64_t base_addr, const uint8_t* p, size_t n,
                         uint16_t flags);
// Writes the tables kept so far as prologue blocks (stream 0) of the segment just opened.
void segment_write_prologue();
// Forgets the tables (a new trace: a forked child's).

}  // namespace memtide::rec
