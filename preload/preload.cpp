// libmemtide.so: the interposed functions. Each is a shim: forward to the backing allocator
// or the real function (recorder/backing.h), tell the recorder, return. All logic lives in
// recorder/.
//
// Sections:
//   [1] C allocation API
//   [2] C++ operators new / delete
//   [3] Anonymous mappings
//   [4] Modules, threads, exit, exec
//   [5] memtide.h entry points
//   [6] Start-up and exit
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

#include "recorder/backing.h"
#include "recorder/own_heap.h"
#include "recorder/process.h"
#include "recorder/recorder.h"

#define MT_EXPORT extern "C" __attribute__((visibility("default")))
#define MT_UNLIKELY(x) __builtin_expect(!!(x), 0)
// The calling shim's frame: this file is compiled with frame pointers and without sibling
// calls (CMakeLists.txt), so it holds the saved rbp and the return address into the program,
// and stays alive until the recorder has unwound from it.
#define MT_FRAME __builtin_frame_address(0)

using memtide::fmt::Api;

#ifdef MEMTIDE_FLOOR
// libmemtide-floor.so (bench/): the same shims forwarding every heap call without telling the
// recorder, the cost of interposing itself, which no recording mode can go below.
namespace memtide::floor {
using namespace memtide::rec;
inline void alloc_hook(fmt::Api, void*, size_t, const void*) {}
inline void free_hook(fmt::Api, void*) {}
inline ReallocTicket on_realloc_begin(void*) { return {}; }
inline void on_realloc_end(const ReallocTicket&, fmt::Api, void*, void*, size_t, const void* = nullptr) {}
}  // namespace memtide::floor
namespace rec = memtide::floor;
#else
namespace rec = memtide::rec;
#endif

namespace {

// Before the real functions are resolved (dlsym allocates), blocks come from the pool.
inline bool ready() {
  if (MT_UNLIKELY(!rec::backing_ready())) rec::resolve_backing();
  return rec::backing_ready();
}

inline void* checked_mul(size_t a, size_t b, size_t& out) {
  if (__builtin_mul_overflow(a, b, &out)) {
    errno = ENOMEM;
    return nullptr;
  }
  return reinterpret_cast<void*>(1);
}

// A hook entered while its thread runs the recorder: the recorder's own allocation (libdw's)
// is served from its own arena (recorder/own_heap.h).
inline bool own_turn() { return MT_UNLIKELY(rec::tls_busy) && rec::own_turn(); }

inline void free_block(Api api, void* p) {
  if (!p) return;
  if (MT_UNLIKELY(rec::own_block(p))) return rec::own_free(p);
  rec::free_hook(api, p);  // timestamped before the block can be reused
  rec::backing_free(p);
}

// operator new on the backing allocator. When it fails, libstdc++'s own operator (found by
// name) runs the new-handler loop and throws std::bad_alloc (or returns null for nothrow), so
// libmemtide itself needs no C++ runtime.
template <typename Fn, typename... A>
void* real_operator(const char* name, A... args) {
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
  if (!fn) return nullptr;
  // (Not call_backing's scope: libstdc++'s operator calls malloc, which is no handler's.)
  rec::BusyScope busy;
  return fn(args...);
}

__attribute__((always_inline)) inline void* new_block(Api api, size_t n, size_t align, const char* real_name, bool nothrow) {
  const size_t want = n ? n : 1;
  void* p = !ready()      ? rec::pool_alloc(want, align)
            : align <= 16 ? rec::call_backing(rec::backing.malloc, want)
                          : rec::call_backing(rec::backing.memalign, align, want);
  if (MT_UNLIKELY(!p)) {
    if (align <= 16 && nothrow)
      p = real_operator<void* (*)(size_t, const std::nothrow_t&)>(real_name, n, std::nothrow);
    else if (align <= 16)
      p = real_operator<void* (*)(size_t)>(real_name, n);
    else if (nothrow)
      p = real_operator<void* (*)(size_t, std::align_val_t, const std::nothrow_t&)>(real_name, n, std::align_val_t(align), std::nothrow);
    else
      p = real_operator<void* (*)(size_t, std::align_val_t)>(real_name, n, std::align_val_t(align));
    if (!p) return nullptr;
  }
  rec::alloc_hook(api, p, n, MT_FRAME);
  return p;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// [1] C allocation API
// ---------------------------------------------------------------------------------------
MT_EXPORT void* malloc(size_t n) {
  if (MT_UNLIKELY(!ready())) return rec::pool_alloc(n, 16);
  if (own_turn()) return rec::own_malloc(n);
  void* p = rec::call_backing(rec::backing.malloc, n);
  rec::alloc_hook(Api::Malloc, p, n, MT_FRAME);
  return p;
}

MT_EXPORT void free(void* p) { free_block(Api::Free, p); }

MT_EXPORT void* calloc(size_t n, size_t size) {
  size_t total;
  if (!checked_mul(n, size, total)) return nullptr;
  if (MT_UNLIKELY(!ready())) return rec::pool_alloc(total, 16);
  if (own_turn()) return rec::own_calloc(n, size);
  void* p = rec::call_backing(rec::backing.calloc, n, size);
  rec::alloc_hook(Api::Calloc, p, total, MT_FRAME);
  return p;
}

MT_EXPORT void* realloc(void* old, size_t n) {
  if (MT_UNLIKELY(!ready())) {
    void* p = rec::pool_alloc(n, 16);
    if (p && old) std::memcpy(p, old, rec::pool_usable_size(old) < n ? rec::pool_usable_size(old) : n);
    return p;
  }
  if (const bool own = own_turn(); own || MT_UNLIKELY(rec::own_block(old))) return rec::own_realloc(old, n, own);
  const rec::ReallocTicket t = rec::on_realloc_begin(old);
  void* p = rec::call_backing(rec::backing_realloc, old, n);
  rec::on_realloc_end(t, Api::Realloc, old, p, n, MT_FRAME);
  return p;
}

MT_EXPORT void* reallocarray(void* old, size_t n, size_t size) {
  size_t total;
  if (!checked_mul(n, size, total)) return nullptr;
  if (MT_UNLIKELY(!ready()) || own_turn() || MT_UNLIKELY(rec::own_block(old))) return realloc(old, total);
  const rec::ReallocTicket t = rec::on_realloc_begin(old);
  void* p = rec::call_backing(rec::backing_realloc, old, total);
  rec::on_realloc_end(t, Api::Reallocarray, old, p, total, MT_FRAME);
  return p;
}

MT_EXPORT int posix_memalign(void** out, size_t align, size_t n) {
  if (MT_UNLIKELY(!ready())) {
    *out = rec::pool_alloc(n, align);
    return *out ? 0 : ENOMEM;
  }
  if (own_turn()) {
    if (align < sizeof(void*) || (align & (align - 1))) return EINVAL;
    void* p = rec::own_aligned(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
  }
  const int r = rec::call_backing(rec::backing.posix_memalign, out, align, n);
  if (r == 0) rec::alloc_hook(Api::PosixMemalign, *out, n, MT_FRAME);
  return r;
}

MT_EXPORT void* aligned_alloc(size_t align, size_t n) {
  if (MT_UNLIKELY(!ready())) return rec::pool_alloc(n, align);
  if (own_turn()) return rec::own_aligned(align, n);
  void* p = rec::call_backing(rec::backing.aligned_alloc, align, n);
  rec::alloc_hook(Api::AlignedAlloc, p, n, MT_FRAME);
  return p;
}

MT_EXPORT void* memalign(size_t align, size_t n) {
  if (MT_UNLIKELY(!ready())) return rec::pool_alloc(n, align);
  if (own_turn()) return rec::own_aligned(align, n);
  void* p = rec::call_backing(rec::backing.memalign, align, n);
  rec::alloc_hook(Api::Memalign, p, n, MT_FRAME);
  return p;
}

MT_EXPORT void* valloc(size_t n) {
  if (MT_UNLIKELY(!ready())) return rec::pool_alloc(n, 4096);
  if (own_turn()) return rec::own_aligned(4096, n);
  void* p = rec::call_backing(rec::backing.valloc, n);
  rec::alloc_hook(Api::Valloc, p, n, MT_FRAME);
  return p;
}

MT_EXPORT void* pvalloc(size_t n) {
  if (MT_UNLIKELY(!ready())) return rec::pool_alloc((n + 4095) & ~size_t{4095}, 4096);
  if (own_turn()) return rec::own_aligned(4096, (n + 4095) & ~size_t{4095});
  void* p = rec::call_backing(rec::backing.pvalloc, n);
  rec::alloc_hook(Api::Pvalloc, p, n, MT_FRAME);
  return p;
}

MT_EXPORT size_t malloc_usable_size(void* p) {
  if (MT_UNLIKELY(!ready())) return p ? rec::pool_usable_size(p) : 0;
  if (MT_UNLIKELY(rec::own_block(p))) return rec::own_usable_size(p);
  return rec::backing_usable_size(p);
}

// ---------------------------------------------------------------------------------------
// [2] C++ operators
// ---------------------------------------------------------------------------------------
MT_EXPORT void* _Znwm(size_t n) { return new_block(Api::New, n, 0, "_Znwm", false); }
MT_EXPORT void* _Znam(size_t n) { return new_block(Api::NewArray, n, 0, "_Znam", false); }
MT_EXPORT void* _ZnwmRKSt9nothrow_t(size_t n, const std::nothrow_t&) noexcept {
  return new_block(Api::New, n, 0, "_ZnwmRKSt9nothrow_t", true);
}
MT_EXPORT void* _ZnamRKSt9nothrow_t(size_t n, const std::nothrow_t&) noexcept {
  return new_block(Api::NewArray, n, 0, "_ZnamRKSt9nothrow_t", true);
}
MT_EXPORT void* _ZnwmSt11align_val_t(size_t n, std::align_val_t a) {
  return new_block(Api::NewAligned, n, static_cast<size_t>(a), "_ZnwmSt11align_val_t", false);
}
MT_EXPORT void* _ZnamSt11align_val_t(size_t n, std::align_val_t a) {
  return new_block(Api::NewArrayAligned, n, static_cast<size_t>(a), "_ZnamSt11align_val_t", false);
}
MT_EXPORT void* _ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_block(Api::NewAligned, n, static_cast<size_t>(a), "_ZnwmSt11align_val_tRKSt9nothrow_t", true);
}
MT_EXPORT void* _ZnamSt11align_val_tRKSt9nothrow_t(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_block(Api::NewArrayAligned, n, static_cast<size_t>(a), "_ZnamSt11align_val_tRKSt9nothrow_t", true);
}

MT_EXPORT void _ZdlPv(void* p) noexcept { free_block(Api::Delete, p); }
MT_EXPORT void _ZdlPvm(void* p, size_t) noexcept { free_block(Api::Delete, p); }
MT_EXPORT void _ZdlPvRKSt9nothrow_t(void* p, const std::nothrow_t&) noexcept { free_block(Api::Delete, p); }
MT_EXPORT void _ZdaPv(void* p) noexcept { free_block(Api::DeleteArray, p); }
MT_EXPORT void _ZdaPvm(void* p, size_t) noexcept { free_block(Api::DeleteArray, p); }
MT_EXPORT void _ZdaPvRKSt9nothrow_t(void* p, const std::nothrow_t&) noexcept { free_block(Api::DeleteArray, p); }
MT_EXPORT void _ZdlPvSt11align_val_t(void* p, std::align_val_t) noexcept { free_block(Api::DeleteAligned, p); }
MT_EXPORT void _ZdlPvmSt11align_val_t(void* p, size_t, std::align_val_t) noexcept {
  free_block(Api::DeleteAligned, p);
}
MT_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  free_block(Api::DeleteAligned, p);
}
MT_EXPORT void _ZdaPvSt11align_val_t(void* p, std::align_val_t) noexcept { free_block(Api::DeleteArrayAligned, p); }
MT_EXPORT void _ZdaPvmSt11align_val_t(void* p, size_t, std::align_val_t) noexcept {
  free_block(Api::DeleteArrayAligned, p);
}
MT_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  free_block(Api::DeleteArrayAligned, p);
}

// ---------------------------------------------------------------------------------------
// [3] Anonymous mappings
// ---------------------------------------------------------------------------------------
MT_EXPORT void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  if (MT_UNLIKELY(!ready())) return reinterpret_cast<void*>(syscall(SYS_mmap, addr, len, prot, flags, fd, off));
  void* p = rec::real.mmap(addr, len, prot, flags, fd, off);
  rec::on_mmap(p, len, flags, fd, MT_FRAME);
  return p;
}

MT_EXPORT void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return mmap(addr, len, prot, flags, fd, off);
}

MT_EXPORT int munmap(void* addr, size_t len) {
  if (MT_UNLIKELY(!ready())) return static_cast<int>(syscall(SYS_munmap, addr, len));
  rec::on_munmap_begin(addr, len);
  return rec::real.munmap(addr, len);
}

MT_EXPORT void* mremap(void* old, size_t old_len, size_t new_len, int flags, ...) {
  void* fixed = nullptr;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    fixed = va_arg(ap, void*);
    va_end(ap);
  }
  if (MT_UNLIKELY(!ready())) return reinterpret_cast<void*>(syscall(SYS_mremap, old, old_len, new_len, flags, fixed));
  void* p = rec::real.mremap(old, old_len, new_len, flags, fixed);
  rec::on_mremap(old, old_len, p, new_len, MT_FRAME);
  return p;
}

// ---------------------------------------------------------------------------------------
// [4] Modules, threads, exit, exec
// ---------------------------------------------------------------------------------------
MT_EXPORT void* dlopen(const char* file, int mode) {
  ready();
  void* h = rec::real.dlopen(file, mode);
  if (h) rec::on_modules_changed();
  return h;
}

MT_EXPORT void* dlmopen(long ns, const char* file, int mode) {
  ready();
  void* h = rec::real.dlmopen(ns, file, mode);
  if (h) rec::on_modules_changed();
  return h;
}

MT_EXPORT int dlclose(void* h) {
  ready();
  const int r = rec::real.dlclose(h);
  if (r == 0) rec::on_modules_changed();
  return r;
}

MT_EXPORT int pthread_getattr_np(pthread_t t, pthread_attr_t* attr) {
  ready();
  if (MT_UNLIKELY(!rec::real.pthread_getattr_np)) return ENOSYS;
  rec::getattr_enter();
  const int r = rec::real.pthread_getattr_np(t, attr);
  rec::getattr_leave();
  return r;
}

MT_EXPORT int pthread_setname_np(pthread_t t, const char* name) {
  ready();
  const int r = rec::real.pthread_setname_np(t, name);
  if (r == 0) rec::on_thread_name(t, name);
  return r;
}

MT_EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  ready();
  if (MT_UNLIKELY(!rec::real.pthread_create)) return ENOSYS;
  const int r = rec::real.pthread_create(thread, attr, fn, arg);
  // (A stack of the program's own is not glibc's to keep.)
  void* own_stack = nullptr;
  size_t own_size = 0;
  if (r == 0 && !(attr && pthread_attr_getstack(attr, &own_stack, &own_size) == 0 && own_stack))
    rec::note_thread_created(*thread);
  return r;
}

// exit: below the stack pointer here, the calling thread's frames are dead for the leak scan.
MT_EXPORT void exit(int status) {
  ready();
  rec::note_exit_sp(reinterpret_cast<uintptr_t>(MT_FRAME));
  if (MT_UNLIKELY(!rec::real.exit)) rec::real.Exit_(status);
  rec::real.exit(status);
  __builtin_unreachable();
}

MT_EXPORT void _exit(int status) {
  ready();
  rec::note_exit_sp(reinterpret_cast<uintptr_t>(MT_FRAME));
  rec::finish_immediate_exit(status);
  rec::real.exit_(status);
  __builtin_unreachable();
}

MT_EXPORT void _Exit(int status) {
  ready();
  rec::note_exit_sp(reinterpret_cast<uintptr_t>(MT_FRAME));
  rec::finish_immediate_exit(status);
  rec::real.Exit_(status);
  __builtin_unreachable();
}

MT_EXPORT void quick_exit(int status) {
  ready();
  rec::note_exit_sp(reinterpret_cast<uintptr_t>(MT_FRAME));
  rec::on_quick_exit(status);
  rec::real.quick_exit(status);
  __builtin_unreachable();
}

MT_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  ready();
  const int r = rec::real.execve(path, argv, rec::on_exec_begin(envp));
  rec::on_exec_failed();
  return r;
}

MT_EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) {
  ready();
  const int r = rec::real.execveat(dirfd, path, argv, rec::on_exec_begin(envp), flags);
  rec::on_exec_failed();
  return r;
}

MT_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  ready();
  const int r = rec::real.fexecve(fd, argv, rec::on_exec_begin(envp));
  rec::on_exec_failed();
  return r;
}

// ---------------------------------------------------------------------------------------
// The trace file's descriptor: kept open whatever the program closes (recorder.h)
// ---------------------------------------------------------------------------------------
MT_EXPORT int close(int fd) {
  if (MT_UNLIKELY(rec::is_trace_fd(fd))) return 0;  // closed as far as the program knows
  return rec::real.close ? rec::real.close(fd) : static_cast<int>(syscall(SYS_close, fd));
}

namespace {
int real_close_range(unsigned first, unsigned last, int flags) {
  return rec::real.close_range ? rec::real.close_range(first, last, flags)
                               : static_cast<int>(syscall(SYS_close_range, first, last, flags));
}
// For closefrom on a kernel without close_range (before 5.9): one close per number.
void close_each(unsigned first, unsigned last) {
  const long open_max = sysconf(_SC_OPEN_MAX);
  for (long fd = first; fd <= static_cast<long>(last) && fd < open_max; ++fd) close(static_cast<int>(fd));
}
void close_from_to(unsigned first, unsigned last) {
  if (real_close_range(first, last, 0) != 0 && errno == ENOSYS) close_each(first, last);
}
}  // namespace

MT_EXPORT int close_range(unsigned first, unsigned last, int flags) {
  const int t = rec::trace_fd();
  // CLOSE_RANGE_CLOEXEC only marks them, as the trace's already is.
  if (t < 0 || (flags & CLOSE_RANGE_CLOEXEC) || static_cast<unsigned>(t) < first || static_cast<unsigned>(t) > last)
    return real_close_range(first, last, flags);
  const unsigned ut = static_cast<unsigned>(t);
  int r = ut > first ? real_close_range(first, ut - 1, flags) : 0;
  if (r == 0 && ut < last) r = real_close_range(ut + 1, last, flags);
  return r;
}

MT_EXPORT void closefrom(int low) {
  const int t = rec::trace_fd();
  if (t < 0 || t < low || low < 0) {
    if (rec::real.closefrom) rec::real.closefrom(low);
    else real_close_range(static_cast<unsigned>(low), ~0u, 0);
    return;
  }
  if (t > low) close_from_to(static_cast<unsigned>(low), static_cast<unsigned>(t) - 1);
  close_from_to(static_cast<unsigned>(t) + 1, ~0u);
}

namespace {
int not_open() {
  errno = EBADF;
  return -1;
}
int call_fcntl(int (*fn)(int, int, ...), int fd, int cmd, void* arg) {
  if (MT_UNLIKELY(rec::is_trace_fd(fd))) return not_open();
  if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) return rec::program_dupfd(fd, cmd, reinterpret_cast<long>(arg));
  return fn ? fn(fd, cmd, arg) : static_cast<int>(syscall(SYS_fcntl, fd, cmd, arg));
}
}  // namespace

MT_EXPORT int dup(int fd) {
  if (MT_UNLIKELY(rec::is_trace_fd(fd))) return not_open();
  return rec::real.dup ? rec::real.dup(fd) : static_cast<int>(syscall(SYS_dup, fd));
}

MT_EXPORT int dup2(int old_fd, int new_fd) {
  if (MT_UNLIKELY(rec::is_trace_fd(old_fd))) return not_open();
  if (MT_UNLIKELY(rec::is_trace_fd(new_fd))) rec::move_trace_fd();
  return rec::real.dup2 ? rec::real.dup2(old_fd, new_fd) : static_cast<int>(syscall(SYS_dup2, old_fd, new_fd));
}

MT_EXPORT int dup3(int old_fd, int new_fd, int flags) {
  if (MT_UNLIKELY(rec::is_trace_fd(old_fd))) return not_open();
  if (MT_UNLIKELY(rec::is_trace_fd(new_fd))) rec::move_trace_fd();
  return rec::real.dup3 ? rec::real.dup3(old_fd, new_fd, flags) : static_cast<int>(syscall(SYS_dup3, old_fd, new_fd, flags));
}

// The recorder's own pipes (libunwind makes one while the recorder starts) go where the
// program's descriptors do not.
MT_EXPORT int pipe2(int fds[2], int flags) {
  const int r = rec::real.pipe2 ? rec::real.pipe2(fds, flags) : static_cast<int>(syscall(SYS_pipe2, fds, flags));
  if (MT_UNLIKELY(r == 0 && rec::busy())) rec::own_pipe_made(fds);
  return r;
}

// (The argument, an int or a pointer by command, is read as glibc's fcntl reads it.)
MT_EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return call_fcntl(rec::real.fcntl, fd, cmd, arg);
}

MT_EXPORT int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return call_fcntl(rec::real.fcntl64, fd, cmd, arg);
}

// The other exec functions call the internal execve, which cannot be interposed, so they
// are implemented here on top of execve (searching PATH where they do).
extern "C" char** environ;

namespace {
int exec_search(const char* file, char* const argv[], char* const envp[]) {
  if (std::strchr(file, '/')) return execve(file, argv, envp);
  const char* path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin";
  char buf[4096];
  int last_errno = ENOENT;
  bool eacces = false;
  for (const char* p = path;; ++p) {
    const char* colon = std::strchr(p, ':');
    const size_t dlen = colon ? static_cast<size_t>(colon - p) : std::strlen(p);
    const size_t flen = std::strlen(file);
    if (dlen + flen + 2 <= sizeof buf) {
      std::memcpy(buf, dlen ? p : ".", dlen ? dlen : 1);
      size_t n = dlen ? dlen : 1;
      buf[n++] = '/';
      std::memcpy(buf + n, file, flen + 1);
      execve(buf, argv, envp);
      if (errno == ENOEXEC) {
        // A script without #!: run it with the shell, as execvp does.
        size_t argc = 0;
        while (argv[argc]) ++argc;
        char* sh_argv[argc + 2];
        sh_argv[0] = const_cast<char*>("/bin/sh");
        sh_argv[1] = buf;
        for (size_t i = 1; i <= argc; ++i) sh_argv[i + 1] = argv[i];
        execve("/bin/sh", sh_argv, envp);
      }
      if (errno == EACCES) eacces = true;
      else if (errno != ENOENT && errno != ENOTDIR) last_errno = errno;
    }
    if (!colon) break;
    p = colon;
  }
  errno = eacces ? EACCES : last_errno;
  return -1;
}

template <size_t N>
size_t collect_args(const char* first, va_list ap, char* (&out)[N]) {
  size_t n = 0;
  out[n++] = const_cast<char*>(first);
  while (n < N - 1) {
    char* a = va_arg(ap, char*);
    out[n++] = a;
    if (!a) return n;
  }
  out[N - 1] = nullptr;
  return N;
}
}  // namespace

MT_EXPORT int execv(const char* path, char* const argv[]) { return execve(path, argv, environ); }
MT_EXPORT int execvp(const char* file, char* const argv[]) { return exec_search(file, argv, environ); }
MT_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return exec_search(file, argv, envp);
}
MT_EXPORT int execl(const char* path, const char* arg, ...) {
  char* argv[1024];
  va_list ap;
  va_start(ap, arg);
  collect_args(arg, ap, argv);
  va_end(ap);
  return execve(path, argv, environ);
}
MT_EXPORT int execlp(const char* file, const char* arg, ...) {
  char* argv[1024];
  va_list ap;
  va_start(ap, arg);
  collect_args(arg, ap, argv);
  va_end(ap);
  return exec_search(file, argv, environ);
}
MT_EXPORT int execle(const char* path, const char* arg, ...) {
  char* argv[1024];
  va_list ap;
  va_start(ap, arg);
  collect_args(arg, ap, argv);
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return execve(path, argv, envp);
}

// Credentials are per thread in Linux; glibc changes every thread's when it knows of more than
// one. While it is told the program's thread is the only one (recorder/own_heap.h), it learns
// of the writer for the call: the writer keeps no credentials the program gave up.
namespace {
template <typename... A>
int setxid(const char* name, A... args) {
  auto fn = reinterpret_cast<int (*)(A...)>(dlsym(RTLD_NEXT, name));
  if (!fn) {
    errno = ENOSYS;
    return -1;
  }
  return rec::as_multithreaded([&] { return fn(args...); });
}
}  // namespace

MT_EXPORT int setuid(uid_t u) noexcept { return setxid("setuid", u); }
MT_EXPORT int setgid(gid_t g) noexcept { return setxid("setgid", g); }
MT_EXPORT int seteuid(uid_t u) noexcept { return setxid("seteuid", u); }
MT_EXPORT int setegid(gid_t g) noexcept { return setxid("setegid", g); }
MT_EXPORT int setreuid(uid_t r, uid_t e) noexcept { return setxid("setreuid", r, e); }
MT_EXPORT int setregid(gid_t r, gid_t e) noexcept { return setxid("setregid", r, e); }
MT_EXPORT int setresuid(uid_t r, uid_t e, uid_t s) noexcept { return setxid("setresuid", r, e, s); }
MT_EXPORT int setresgid(gid_t r, gid_t e, gid_t s) noexcept { return setxid("setresgid", r, e, s); }
MT_EXPORT int setgroups(size_t n, const gid_t* list) noexcept { return setxid("setgroups", n, list); }

// ---------------------------------------------------------------------------------------
// [5] memtide.h
// ---------------------------------------------------------------------------------------
MT_EXPORT void memtide_impl_mark(const char* label) { rec::mark(label); }
MT_EXPORT void memtide_impl_pause(void) { rec::pause(); }
MT_EXPORT void memtide_impl_resume(void) { rec::resume(); }
MT_EXPORT void memtide_impl_alloc(const void* p, size_t n) { rec::alloc_hook(Api::Custom, const_cast<void*>(p), n, MT_FRAME); }
MT_EXPORT void memtide_impl_free(const void* p) { rec::free_hook(Api::Custom, const_cast<void*>(p)); }
MT_EXPORT size_t memtide_impl_sample(size_t bytes) { return rec::set_sampling(bytes); }

// ---------------------------------------------------------------------------------------
// [6] Start-up and exit
// ---------------------------------------------------------------------------------------
__attribute__((constructor(101))) static void memtide_constructor() {
  rec::start();
  rec::install_quick_exit_handler();
}

// The program's main, called through main_with_exit_status: the status exit() gets (a return
// from main included) is known only to exit handlers, and one registered from a constructor
// would run after the destructors that end the trace.
namespace {
int (*g_program_main)(int, char**, char**);
int main_with_exit_status(int argc, char** argv, char** envp) {
  rec::install_exit_status_handler();
  const int status = g_program_main(argc, argv, envp);
  rec::note_exit_sp(reinterpret_cast<uintptr_t>(MT_FRAME));  // main's frames are dead from here
  return status;
}
}  // namespace

MT_EXPORT int __libc_start_main(int (*main)(int, char**, char**), int argc, char** argv, void (*init)(),
                                void (*fini)(), void (*rtld_fini)(), void* stack_end) {
  ready();
  g_program_main = main;
  return rec::real.libc_start_main(main ? main_with_exit_status : main, argc, argv, init, fini, rtld_fini, stack_end);
}
__attribute__((destructor(101))) static void memtide_destructor() { rec::finish_at_exit(); }

// Each shim has the type its row in recorder/hooks.inc gives the function it forwards to (the
// C library's attributes, malloc's or nonnull, are no part of a type).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
namespace {
template <class F>
struct Plain;
template <class R, class... A>
struct Plain<R(A...)> {
  using type = R(A...);
};
template <class R, class... A>
struct Plain<R(A...) noexcept> {
  using type = R(A...);
};
template <class R, class... A>
struct Plain<R(A..., ...)> {
  using type = R(A..., ...);
};
template <class R, class... A>
struct Plain<R(A..., ...) noexcept> {
  using type = R(A..., ...);
};
#define MEMTIDE_HOOK(field, symbol, attach, ret, params)                                          \
  static_assert(std::is_same_v<Plain<decltype(::symbol)>::type, ret params>, #symbol "'s shim and " \
                "recorder/hooks.inc differ");
#define MEMTIDE_SHIM(symbol, attach) static_assert(sizeof(&::symbol) > 0, #symbol " has a shim");
#include "recorder/hooks.inc"
#undef MEMTIDE_SHIM
#undef MEMTIDE_HOOK
}  // namespace
#pragma GCC diagnostic pop
