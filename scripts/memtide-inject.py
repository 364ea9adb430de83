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
import re

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


# The registers a call changes, saved before and written back after, one at a time: gdb writes a
# general register with PTRACE_SETREGS alone, where an inferior function call (`print f()`)
# restores the whole register set, the extended (XSAVE) state included, which gdb 13 cannot
# write on a processor with AMX ("Couldn't write extended state status"). The vector registers
# are not written back: the thread is stopped in a system call of a libc function, across which
# the ABI keeps none of them. orig_rax last: writing the pc resets it, and with its old value the
# kernel restarts the interrupted call as it would have.
SAVED = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14",
         "r15", "eflags", "rip", "orig_rax")


def reg(name):
    v = int(gdb.newest_frame().read_register(name))
    return v - (1 << 64) if v >= 1 << 63 else v


def set_reg(name, value):
    gdb.execute("set $%s = %d" % (name, value), to_string=True)


def in_system_call(thread):
    """Whether the thread is stopped in a system call: `syscall` just before its pc."""
    thread.switch()
    try:
        pc = reg("pc")
        return bytes(gdb.selected_inferior().read_memory(pc - 2, 2)) == b"\x0f\x05"
    except gdb.error:
        return False


def entry_point():
    m = re.search(r"Entry point: (0x[0-9a-f]+)", gdb.execute("info files", to_string=True))
    return int(m.group(1), 16) if m else 0


class Caller:
    """Calls functions of the process on the chosen thread, as a C call from where it stopped."""

    def __init__(self, thread):
        self.thread = thread
        thread.switch()
        self.saved = [(r, reg(r)) for r in SAVED]
        self.ret = entry_point()  # never run again: where each call returns, to a breakpoint
        if not self.ret:
            raise gdb.GdbError("no entry point to return to")
        # Below the red zone, with room for the strings.
        self.base = (reg("rsp") - 128 - 8192) & ~15

    def string(self, offset, text):
        data = text.encode() + b"\0"
        addr = self.base + offset
        gdb.selected_inferior().write_memory(addr, data)
        return addr

    def call(self, fn, *args):
        self.thread.switch()
        sp = self.base - 64
        sp -= 8
        gdb.selected_inferior().write_memory(sp, self.ret.to_bytes(8, "little"))
        set_reg("rip", fn)
        set_reg("orig_rax", -1)
        for name, value in zip(("rdi", "rsi", "rdx"), args):
            set_reg(name, value)
        set_reg("rax", 0)
        set_reg("rsp", sp)
        bp = gdb.Breakpoint("*%d" % self.ret, internal=True)
        try:
            while True:
                gdb.execute("continue", to_string=True)
                if gdb.selected_thread() is None or not gdb.selected_thread().is_valid():
                    raise gdb.GdbError("the process ended during the call")
                if gdb.selected_thread().ptid == self.thread.ptid and reg("pc") == self.ret:
                    break
                self.thread.switch()  # another thread stopped (a signal): go on
        finally:
            bp.delete()
        self.thread.switch()
        return reg("rax")

    def restore(self):
        self.thread.switch()
        for name, value in self.saved:
            set_reg(name, value)


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
    chosen = next((t for t in threads if in_system_call(t) and thread_is_safe(t)), None)
    if chosen is None:
        gdb.execute("detach", to_string=True)
        gdb.execute("quit 3")
    dlopen = int(gdb.parse_and_eval("(long)&dlopen"))
    dlerror = int(gdb.parse_and_eval("(long)&dlerror"))
    dlsym = int(gdb.parse_and_eval("(long)&dlsym"))
    caller = Caller(chosen)
    code = 0
    try:
        lib = caller.string(0, LIB)
        handle = caller.call(dlopen, lib, 2)
        if handle == 0:
            error = caller.call(dlerror)
            text = gdb.selected_inferior().read_memory(error, 512).tobytes().split(b"\0")[0].decode(errors="replace") if error else ""
            say("dlopen failed: %s" % (text or "unknown error"))
            code = 4
        else:
            start = caller.call(dlsym, handle, caller.string(4096, "memtide_attach_start"))
            if start == 0:
                say("dlopen failed: %s has no memtide_attach_start" % LIB)
                code = 4
            else:
                result = caller.call(start, caller.string(4096, CONFIG)) & 0xffffffff
                say("result %d" % (result - (1 << 32) if result >= 1 << 31 else result))
    finally:
        caller.restore()
    gdb.execute("detach", to_string=True)
    gdb.execute("quit %d" % code)


main()
