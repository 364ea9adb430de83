// Checkpoints (checkpoint.cpp): the writer thread keeps its own copy of the live blocks, from the
// records it writes, and every MEMTIDE_CHECKPOINT_INTERVAL seconds or MEMTIDE_CHECKPOINT_BYTES
// of trace writes them (formats/checkpoint.h), so that readers can start a time window there.
// Everything here runs on the writer thread; the program's threads never see it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memtide::rec {

// Whether checkpoints are recorded (options; false once out of memory).
bool checkpoints_on();
// A block of records of `stream` about to be written at file offset `offset`.
void checkpoint_note_block(uint32_t stream, uint64_t base_time, uint64_t base_addr, const uint8_t* p, size_t n,
                           uint64_t offset);
// The events decoded and not yet applied, as bytes of queued chunks: an allocating thread waits
// while the queue and this pass the writer's bound (any thread may read it).
size_t checkpoint_backlog();
// A flush pass wrote every record timed before `w`: applies them to the live blocks.
void checkpoint_pass(uint64_t w);
// Writes a checkpoint at the time of the last pass when one is due at `now` (file offset
// `offset`, the file size so far).
void checkpoint_maybe_write(uint64_t now, uint64_t offset);
// The next checkpoint_maybe_write that can writes one whose replay starts at or after file
// offset `replay_from` (a new segment of a kept trace starts from it), whatever the interval;
// when one is already due, from the earlier offset.
void checkpoint_due(uint64_t replay_from);
// Whether a checkpoint is due (checkpoint_due) and not yet written: the writer makes its next
// pass soon.
bool checkpoint_pending();

}  // namespace memtide::rec
