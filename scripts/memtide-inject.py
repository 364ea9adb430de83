# memtide-inject.py: loads libmemtide.so into a stopped process and starts its recording.
# Run by memtide-attach as `gdb -batch -nx -p PID -x memtide-inject.py`, with
# MEMTIDE_INJECT_LIB (the library) and MEMTIDE_INJECT_CONFIG (the configuration file, as the
# process names it) in gdb's environment. Prints `memtide-inject: result N` (attach.h's
# AttachResult) and quits with 0, or quits with 3 when no thread is at a safe point (the
# caller tries again), 4 when dlopen failed (its error printed).
#
# The calls run on a thread stopped outside the allocator and the loader: a thread stopped
# inside malloc holds its arena's lock, and dlopen, run on it, would wait for that lock for
# ever. The other threads run during the calls (scheduler-locking off), so a lock one of them
# holds is released as it would be untraced.
import os

import gdb

LIB = os.environ["MEMTIDE_INJECT_LIB"]
CONFIG = os.environ["MEMTIDE_INJECT_CONFIG"]

UNSAFE_PREFIXES = ("_int_", "__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc", "__libc_memalign",
                   "__libc_valloc", "__libc_pvalloc", "__malloc_", "_dl_", "__libc_dl", "__libc_fork", "_Fork",
                   "malloc", "free", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign", "valloc",
                   "pvalloc", "mallinfo", "cfree", "sysmalloc", "tcache", "arena_", "dl", "fork", "__fork",
                   "pthread_create", "__pthread_create", "exit", "__run_exit_handlers", "_exit", "__libc_start")


def say(text):
    print("memtide-inject: " + text, flush=True)


def unsafe_frame(frame):
    """Why running code on this frame's thread could deadlock, or None."""
    solib = gdb.solib_name(frame.pc()) or ""
    base = os.path.basename(solib)
    if base.startswith("ld-linux") or base.startswith("ld-"):
        return "in the loader"
    if "libmemtide" in base:
        return "in libmemtide"
    name = frame.name() or ""
    if base.startswith("libc.so") and name.startswith(UNSAFE_PREFIXES):
        return "in " + name
    return None


def thread_is_safe(thread):
    thread.switch()
    try:
        frame = gdb.newest_frame()
    except gdb.error:
        return False
    for _ in range(48):
        if frame is None:
            return True
        if unsafe_frame(frame):
            return False
        try:
            frame = frame.older()
        except gdb.error:
            return True
    return True


def main():
    gdb.execute("set confirm off")
    gdb.execute("set scheduler-locking off")
    gdb.execute("set unwindonsignal on")
    gdb.execute("set unwind-on-terminating-exception on")
    for sig in ("SIGUSR1", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGCHLD", "SIGTERM", "SIGHUP", "SIGINT", "SIGWINCH",
                "SIGPROF", "SIGVTALRM", "SIGIO", "SIGURG"):
        gdb.execute("handle %s nostop noprint pass" % sig, to_string=True)
    inferior = gdb.selected_inferior()
    threads = sorted(inferior.threads(), key=lambda t: t.num)
    chosen = next((t for t in threads if thread_is_safe(t)), None)
    if chosen is None:
        gdb.execute("detach", to_string=True)
        gdb.execute("quit 3")
    chosen.switch()
    handle = int(gdb.parse_and_eval('((void*(*)(const char*, int))dlopen)("%s", 2)' % LIB))
    if handle == 0:
        error = gdb.parse_and_eval("((char*(*)(void))dlerror)()")
        say("dlopen failed: %s" % (error.string() if int(error) else "unknown error"))
        gdb.execute("detach", to_string=True)
        gdb.execute("quit 4")
    start = int(gdb.parse_and_eval('((void*(*)(void*, const char*))dlsym)((void*)%d, "memtide_attach_start")' % handle))
    if start == 0:
        say("dlopen failed: %s has no memtide_attach_start" % LIB)
        gdb.execute("detach", to_string=True)
        gdb.execute("quit 4")
    result = int(gdb.parse_and_eval('((int(*)(const char*))%d)("%s")' % (start, CONFIG)))
    say("result %d" % result)
    gdb.execute("detach", to_string=True)
    gdb.execute("quit 0")


main()
