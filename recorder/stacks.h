// The stack table (stacks.cpp): one id per distinct stack, in a trie shared by every thread.
#pragma once

#include <pthread.h>

#include <cstdint>

#include "recorder/state.h"

namespace memtide::rec {

// The id of the stack `ips[0..n)` (leaf first), adding its new trie nodes (and a StackDef record
// into `s`) on first sight.
uint32_t stack_id(ThreadState* ts, Stream* s, void* const* ips, int n);
extern pthread_mutex_t stacks_mutex;

}  // namespace memtide::rec
