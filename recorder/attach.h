// Recording a process that is already running (`memtide attach`): libmemtide.so is loaded
// into it with dlopen, so the loader never binds the program's calls to the shims. Instead
// every loaded module's GOT entries for the interposed functions are redirected to them, and
// restored when the recording ends (docs/ARCHITECTURE.md, "Attaching to a running process").
#pragma once

#include <cstddef>

namespace memtide::rec {

// Whether libmemtide was loaded after libc (by dlopen, not LD_PRELOAD or the executable's
// needs): its constructor then leaves the program alone until attach_start.
bool loaded_after_libc();

// What attach_start answers (the injector prints it; `memtide attach` explains it).
enum AttachResult : int {
  kAttachOk = 0,
  kAttachBadConfig = 1,        // the configuration file could not be read
  kAttachAlreadyRecording = 2,  // recorded with LD_PRELOAD, or attached already
  kAttachForeignMalloc = 3,    // malloc is not the C library's: its blocks would be freed by the wrong allocator
  kAttachNoTrace = 4,          // the trace file could not be created
  kAttachNoThread = 5,         // the control thread could not be started
};

// Starts (or, after a detach, starts again) a recording configured by the file `config`:
// `MEMTIDE_*=value` lines (the recorder's options), `control=FIFO` (read by a thread of the
// recorder's: a byte or its end stops the recording) and `status=DIR` (where `started` and
// `done` files name the trace). Then redirects every module's entries.
int attach_start(const char* config);

// Whether the recording is attached (entries redirected).
bool attached();
// Attached: appends a line of the recorder's (message()) to the status directory's `messages`,
// which `memtide attach` relays on its own stderr; the process's stderr is the program's. False
// when not attached (the line goes to stderr).
bool attach_message(const char* line, size_t n);

// A module was loaded: its entries are redirected too.
void attach_modules_changed();

// After a detach, before a new trace: every thread's state starts again (start_attached).
void attach_restart_streams();

// The options line of the trace's ProcessInfo while attached, else null.
const char* attach_options_text();

// In a forked child of an attached process: its entries are restored and it records nothing.
void attach_fork_child();

}  // namespace memtide::rec
