// Thread state (threads.cpp): made at a thread's first event, ended by its exit destructor.
#pragma once

#include <cstdint>

#include "formats/records.h"
#include "recorder/stream.h"

namespace memtide::rec {

// The key's destructor (pthread_key_create at start-up): the thread's ThreadExit, its last chunk.
void thread_exit_destructor(void* p);
// A ThreadStart (with `os_tid`), ThreadName (`name`) or ThreadExit record of stream `s`.
void append_thread_record(Stream* s, fmt::RecordType type, uint64_t os_tid, const char* name);
// The thread's ThreadStart, then its name as /proc has it (ThreadName), to `s`.
void append_thread_start(Stream* s, pid_t tid);
// Whether a signal handler of the program's runs between the caller and the busy scope
// `scope` (tls_busy_scope's value) of its thread: a signal frame lies between the two, or the
// caller runs on another stack (sigaltstack). False when the thread's stack is not known.
bool handler_since(uintptr_t scope);
// Learns the signal restorer handler_since looks for, once, at start-up.
void learn_signal_restorer();

}  // namespace memtide::rec
