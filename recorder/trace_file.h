// The trace file (trace_file.cpp; the descriptor's number: trace_fd.cpp).
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>

#include "formats/records.h"

namespace memtide::rec {

// Creates the file named by --output (with a numeric suffix where the name exists) and writes
// its header. `child`: a forked child's (a pattern without %p gets its pid).
bool open_trace_file(bool child);
// Reopens recording.path to append to it (an exec failed after the End{Exec} record).
bool reopen_trace_file();

// Writing stopped (g_trace.file.write_failed): a write failed, the program closed the
// descriptor, or the size limit.
// Stops writing with one message (`why`); the program goes on.
void stop_writing(const char* why);
// The writer has no memory for a block: recording stops (said once) and the trace is ended by
// end_if_capped with an End record of reason Error.
void stop_out_of_memory();
// Appends bytes to the file, unless its descriptor is no longer the trace's.
void write_all(const uint8_t* p, size_t n);
// Bytes written to the trace file so far: the offset of the next block.
uint64_t trace_file_bytes();
// Points the file header at the latest checkpoint's head block (formats/checkpoint.h).
void set_checkpoint_pointer(uint64_t head);
// Whether a block of `total` bytes may be written without passing the size limit, with room
// left for the End record; if not, recording stops (the program goes on).
bool within_size_limit(size_t total);

// A kept trace (MEMTIDE_KEEP): whether a block of `total` bytes is for the next segment, and
// the writer's opening of it (trace_file.cpp, section [5]).
bool segment_due(size_t total);
void rotate_segment();
// Before a block of records: makes a checkpoint due when the set's spacing of them says so.
void segment_checkpoint_check();
// A checkpoint of `bytes` was written whose replay starts at file offset `replay_from`: the
// segments before the one holding it may go.
void segment_checkpoint_written(uint64_t replay_from, uint64_t bytes);

// The recorder's counts of allocations and frees so far (each counted once committed), for the
// End record.
void recorded_counts(uint64_t& allocs, uint64_t& frees);
// The End record, appended to the process stream (the writer's last pass), with counts taken
// before that pass: every event they count is in the file (readers compare).
void append_end(fmt::EndReason reason, uint64_t status, uint64_t allocs, uint64_t frees);
// Once the size limit stopped the recording: ends the trace with an End record (reason
// Detached) in a block of its own, in the room kept for it, and releases the file's lock.
void end_if_capped();

// Closes recording.fd (bypassing the interposed close, which keeps it open) and sets it to -1.
void close_trace_fd();
// Held while the trace's descriptor is used for writing, and while a dup2 or dup3 of the
// program moves it (move_trace_fd): a write never goes to a number the program is taking over.
extern pthread_mutex_t trace_fd_mutex;
// A descriptor for the trace file out of the program's reach (dup_out_of_reach), close-on-exec;
// `fd` itself is closed. Kept as it is when no better number is free.
int high_trace_fd(int fd);

// trace_fd.cpp: a close-on-exec copy of `fd` just above the soft RLIMIT_NOFILE when the hard
// limit allows, else at the highest free number below the limit (at most 64Ki) but the top
// `spare_top` ones; -1 when none is free. `fd` stays open.
int dup_out_of_reach(int fd, int spare_top = 0);
// fcntl as a system call, never the interposed one.
int sys_fcntl(int fd, int cmd, long arg);
// `fd` moved to dup_out_of_reach's number (the old one closed); `fd` itself when none is free.
int move_out_of_reach(int fd, int spare_top = 0);
// What the recorder's other descriptors leave to the trace's below the limit.
inline constexpr int kTraceFdSpare = 1;

}  // namespace memtide::rec
