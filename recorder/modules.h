// Loaded modules (modules.cpp): ModuleLoad / ModuleUnload records in the process stream, and
// libmemtide's own range, skipped in stacks.
#pragma once

#include <link.h>
#include <pthread.h>

#include <cstddef>
#include <cstdint>

namespace memtide::rec {

// Scans the loaded modules and appends what changed to the process stream.
void modules_scan();
extern pthread_mutex_t modules_mutex;
void find_own_range();
// The GNU build-id of a loaded module, from its program headers in memory.
bool loaded_build_id(const ElfW(Phdr)* phdr, int phnum, uintptr_t bias, const uint8_t*& id, size_t& len);

}  // namespace memtide::rec
