// The recorder's life in its process: start-up, markers and pause, and its end (exit, exec,
// fork, fatal signals).
//
// Sections:
//   [1] Start-up
//   [2] Modules, markers, pause
//   [3] Exit, exec, fork, fatal signals
#include "recorder/lifecycle.h"

#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <signal.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "formats/record_builders.h"
#include "recorder/attach.h"
#include "recorder/backing.h"
#include "recorder/events.h"
#include "recorder/modules.h"
#include "recorder/process.h"
#include "recorder/recorder.h"
#include "recorder/sampling.h"
#include "recorder/segment_helper.h"
#include "recorder/stacks.h"
#include "recorder/state.h"
#include "recorder/trace_state.h"
#include "recorder/threads.h"
#include "recorder/trace_file.h"
#include "recorder/writer.h"

extern "C" char** environ;

namespace memtide::rec {

Recording recording;

// ---------------------------------------------------------------------------------------
// [1] Start-up
// ---------------------------------------------------------------------------------------
namespace {

pthread_mutex_t g_start_mutex = MT_MUTEX_INITIALIZER;
// MEMTIDE_CHECK_OPTIONS's value when the program gates itself at exit (self_check): set, and
// not under `memtide run`, which gates every process of its run itself.
const char* g_check_options = nullptr;
bool g_dormant = false;  // loaded by `memtide attach`, not attached yet

void install_fork_handlers();
void install_signal_handlers();

// Whether `p` is in libmemtide's code (false when its range is not known).
bool is_own_code(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return recording.own_range_known && a >= recording.own_lo && a < recording.own_hi;
}

// Where `name` is defined ahead of libmemtide, as the loader binds the calls of every module to
// it (libc's own included), or null when that is libmemtide's. A program that only takes the
// function's address (node, not position-independent) has a stub of its own that dlsym finds
// but that is no definition: its calls still reach libmemtide.
const void* defined_ahead(const char* name) {
  void* first = dlsym(RTLD_DEFAULT, name);
  if (!first || is_own_code(first)) return nullptr;
  Dl_info info{};
  void* entry = nullptr;
  const int found = dladdr1(first, &info, &entry, RTLD_DL_SYMENT);
  const auto* sym = static_cast<const ElfW(Sym)*>(entry);
  if (!found || !sym || sym->st_shndx == SHN_UNDEF ||
      !info.dli_sname || std::strcmp(info.dli_sname, name) != 0 || info.dli_saddr != first)
    return nullptr;
  return first;
}

// "LD_PRELOAD=<list>" without libmemtide's own entry (names are separated by colons or
// spaces), written to `buf`; nullptr when no other entry is left.
const char* preload_without_own(const char* list, char* buf, size_t cap) {
  static const char kName[] = "LD_PRELOAD=";
  size_t n = sizeof kName - 1;
  std::memcpy(buf, kName, n);
  bool any = false;
  for (const char* p = list; *p;) {
    while (*p == ':' || *p == ' ') ++p;
    const char* end = p;
    while (*end && *end != ':' && *end != ' ') ++end;
    if (end == p) break;
    const char* base = end;
    while (base > p && base[-1] != '/') --base;
    const bool own = static_cast<size_t>(end - base) == 13 && std::strncmp(base, "libmemtide.so", 13) == 0;
    const size_t len = static_cast<size_t>(end - p);
    if (!own && n + len + 2 < cap) {
      if (any) buf[n++] = ':';
      std::memcpy(buf + n, p, len);
      n += len;
      any = true;
    }
    p = end;
  }
  buf[n] = 0;
  return any ? buf : nullptr;
}

// Copies `env` into `out` (room for `cap` pointers, the last for the null) without the
// recorder's variables (MEMTIDE_*) and with libmemtide left out of LD_PRELOAD (its new value
// in `preload_buf`): what a program not followed (--no-follow) and its children see.
void env_without_own(char* const* env, char** out, size_t cap, char* preload_buf, size_t preload_cap) {
  size_t n = 0;
  for (size_t i = 0; env[i] && n + 1 < cap; ++i) {
    char* e = env[i];
    if (std::strncmp(e, "MEMTIDE_", 8) == 0) continue;
    if (std::strncmp(e, "LD_PRELOAD=", 11) == 0) {
      e = const_cast<char*>(preload_without_own(e + 11, preload_buf, preload_cap));
      if (!e) continue;
    }
    out[n++] = e;
  }
  out[n] = nullptr;
}

// --no-follow: not followed means not touched. The program and whatever it starts see the
// environment they would see untraced. In place, without setenv (which allocates): the
// variables' strings stay where they are (recording.opts and recording.manifest point into them).
char g_preload_value[4096];
void leave_environment() {
  if (!environ) return;
  size_t n = 0;
  while (environ[n]) ++n;
  // The array is rewritten in place: the result is never longer.
  env_without_own(environ, environ, n + 1, g_preload_value, sizeof g_preload_value);
}

// Phase 1, possibly from inside the very first allocation hook: everything but the file
// and the writer thread. Events are buffered from here on.
// The options, from the environment or (attached) as given, with the mode's defaults.
void configure(const Options* given) {
  if (given) recording.opts = *given;
  else
    recording.opts = options_from_env([](const char* env, const char* value, const char* problem) {
      message("ignoring %s=%s: %s", env, value, problem);
    });
  apply_mode_defaults(recording.opts);
  if (recording.opts.allocator == AllocatorKind::Mimalloc) use_mimalloc_backing();
  sampling::configure(recording.opts.sample, recording.opts.sample_seed);
}

void early_init(const Options* given = nullptr) {
  pthread_mutex_lock(&g_start_mutex);
  if (recording.state.load(std::memory_order_acquire) != kUninit) {
    pthread_mutex_unlock(&g_start_mutex);
    return;
  }
  recording.state.store(kStarting, std::memory_order_release);
  configure(given);
  if (const char* v = std::getenv(kTestChunkEnv)) {
    const unsigned long n = std::strtoul(v, nullptr, 10);
    if (n >= 16 && n <= kMaxChunkSize) recording.chunk_first = recording.chunk_max = static_cast<uint32_t>(n);
  }
  recording.pid = getpid();
  begin_trace(given ? TraceOrigin::kAttach : TraceOrigin::kProgramStart);
  pthread_key_create(&recording.thread_key, thread_exit_destructor);
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  find_own_range();
  if (recording.own_range_known && !given) {  // (attached: attach_start checks malloc)
    const void* first = defined_ahead("malloc");
    if (!first) first = defined_ahead("realloc");
    Dl_info info{};
    if (first) recording.foreign_malloc_in = dladdr(first, &info) && info.dli_fname && *info.dli_fname ? info.dli_fname : "the program";
  }
  pthread_mutex_lock(&recording.shared_mutex);
  append_process_info(&recording.shared);
  pthread_mutex_unlock(&recording.shared_mutex);
  if (!given) {
    recording.manifest = std::getenv("MEMTIDE_MANIFEST");
    segment_helper_configure();
    if (!recording.manifest) {
      // The gate counts what is unreachable at exit, as LeakSanitizer does: scan unless told.
      g_check_options = std::getenv("MEMTIDE_CHECK_OPTIONS");
      if (g_check_options && !recording.opts.was_given(kOption_leak_scan)) recording.opts.leak_scan = true;
    }
    if (!recording.opts.follow) leave_environment();  // (before the program's main)
  }
  recording.state.store(kActive, std::memory_order_release);
  pthread_mutex_unlock(&g_start_mutex);
}

}  // namespace

bool ensure_started() {
  const int s = recording.state.load(std::memory_order_acquire);
  if (MT_LIKELY(s == kActive)) return true;
  if (s != kUninit || g_dormant) return false;
  if (!backing_ready()) return false;
  {
    BusyScope busy(kOwnAllocs);
    early_init();
  }
  return recording.state.load(std::memory_order_acquire) == kActive;
}

namespace {

// A program whose executable (or a library loaded before libmemtide) defines malloc itself
// (a sanitizer's runtime linked in, an allocator built into the program) keeps it: the
// program's calls never reach the interposer, and the trace would be empty without a word.
void say_if_malloc_is_not_ours() {
  const char* where = recording.foreign_malloc_in;
  if (!where) return;
  const bool sanitizer = dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__lsan_init") ||
                         dlsym(RTLD_DEFAULT, "__msan_init") ||
                         dlsym(RTLD_DEFAULT, "__tsan_init") || dlsym(RTLD_DEFAULT, "__hwasan_init");
  message("malloc is defined in %s%s, ahead of libmemtide: the allocations made through it are not recorded, "
          "and memory mappings are recorded without their stacks%s",
          where, sanitizer ? " (a sanitizer's runtime)" : "", sanitizer ? "; record a build without the sanitizer" : "");
}

}  // namespace

void start() {
  BusyScope busy(kOwnAllocs);  // (the writer thread's stack, the file, dlsym)
  // Loaded by `memtide attach` (dlopen): nothing starts until attach_start.
  if (loaded_after_libc()) {
    g_dormant = true;
    return;
  }
  resolve_backing();
  // The program's allocator sets up its cache for the main thread now, while no handler of the
  // program's can interrupt it: the recorder's own allocations before main come from its arena
  // (own_heap.h), and glibc's first call takes its arena lock even in a single thread.
  backing_free(call_backing(backing.malloc, 1));
  early_init();
  pthread_mutex_lock(&g_start_mutex);
  if (!recording.started && recording.state.load() == kActive) {
    recording.started = true;
    if (open_trace_file(/*child=*/false)) {
      modules_scan();
      install_fork_handlers();
      install_signal_handlers();
      learn_signal_restorer();
      writer_start();
      say_if_malloc_is_not_ours();
    } else {
      recording.state.store(kStopped, std::memory_order_release);
    }
  }
  pthread_mutex_unlock(&g_start_mutex);
}

bool busy() { return tls_busy != 0; }

bool start_attached(const Options& opts) {
  BusyScope busy(kOwnAllocs);  // (as start())
  resolve_backing();
  pthread_mutex_lock(&g_start_mutex);
  const int state = recording.state.load();
  const bool again = recording.started;
  pthread_mutex_unlock(&g_start_mutex);
  if (state == kActive || state == kStarting) return false;
  if (!again) {
    g_dormant = false;
    early_init(&opts);
  } else {
    // After a detach: a new trace, from a recorder whose threads keep their states.
    pthread_mutex_lock(&g_start_mutex);
    sampling::g_interval.store(0);
    configure(&opts);
    begin_trace(TraceOrigin::kReattach);
    append_process_info(&recording.shared);
    recording.state.store(kActive, std::memory_order_release);
    pthread_mutex_unlock(&g_start_mutex);
  }
  pthread_mutex_lock(&g_start_mutex);
  bool ok = recording.state.load() == kActive;
  if (ok) {
    if (!recording.started) install_fork_handlers();
    recording.started = true;
    ok = open_trace_file(/*child=*/false);
    if (ok) {
      modules_scan();
      writer_start();
    } else {
      recording.state.store(kStopped, std::memory_order_release);
    }
  }
  pthread_mutex_unlock(&g_start_mutex);
  return ok;
}


// ---------------------------------------------------------------------------------------
// [2] Modules, markers, pause
// ---------------------------------------------------------------------------------------
void on_modules_changed() {
  if (attached()) attach_modules_changed();
  if (tls_busy || recording.state.load() != kActive || !recording.started) return;
  BusyScope busy;
  modules_scan();
}

void mark(const char* label) {
  if (!label) return;
  Target t;
  if (!acquire_slow(t)) return;
  {
    BusyScope busy;
    uint8_t buf[1100];
    if (reserve(t.s, sizeof buf)) {  // room first, then the clock (see write_alloc)
      begin_record(t.s);
      const uint64_t now = stream_time(t.s, event_time_now(t.s));
      const size_t n = fmt::encode_marker(buf, sizeof buf, t.s->last_time,
                                          fmt::Marker{now, std::string_view(label, strnlen(label, 1024))});
      if (n && append_record(t.s, buf, n)) t.s->last_time = now;
      end_record(t.s);
    }
  }
  release(t);
}

uint64_t set_sampling(uint64_t bytes) {
  Target t;
  if (!acquire_slow(t, /*even_paused=*/true)) return 0;
  uint64_t interval = 0;
  {
    BusyScope busy;
    uint8_t buf[96];
    if (reserve(t.s, sizeof buf)) {  // room first, then the clock (see write_alloc)
      interval = sampling::set_interval(bytes);
      // A Marker that readers before 2.1 show as its label, with the switch in its last field.
      char label[64];
      if (interval)
        std::snprintf(label, sizeof label, "memtide: sampling 1 in %llu bytes", static_cast<unsigned long long>(interval));
      else
        std::snprintf(label, sizeof label, "memtide: exact recording");
      begin_record(t.s);
      const uint64_t now = stream_time(t.s, event_time_now(t.s));
      const size_t n = fmt::encode_marker(buf, sizeof buf, t.s->last_time,
                                          fmt::Marker{now, std::string_view(label, std::strlen(label)), interval + 1});
      if (n && append_record(t.s, buf, n)) t.s->last_time = now;
      end_record(t.s);
    }
  }
  release(t);
  return interval;
}

void pause() { recording.paused.store(true); }
void resume() { recording.paused.store(false); }

// ---------------------------------------------------------------------------------------
// [3] Exit, exec, fork, fatal signals
// ---------------------------------------------------------------------------------------
namespace {

bool end_recording() {
  int expected = kActive;
  return recording.state.compare_exchange_strong(expected, kStopped);
}

void finish(fmt::EndReason reason, uint64_t status, int timeout_ms) {
  if (recording.state.load() != kActive) return;
  BusyScope busy;
  // After the program's destructors (this runs from libmemtide's own destructor, or exit's
  // last handlers), or at _exit and quick_exit (a shell ends by _exit; the blocks its globals
  // still hold are not leaks): what is live now and reachable from nowhere is a leak. The scan
  // ends the recording itself, with the program's other threads stopped.
  const bool scan = (reason == fmt::EndReason::Exit || reason == fmt::EndReason::ImmediateExit ||
                     reason == fmt::EndReason::QuickExit) &&
                    recording.opts.leak_scan && recording.started;
  if (scan ? !leak_scan_at_exit(reinterpret_cast<uintptr_t>(__builtin_frame_address(0)), end_recording) : !end_recording())
    return;
  if (!recording.started) return;
  unwind_verify_report();
  writer_finish(reason, status, timeout_ms);
}

}  // namespace

namespace {
// exit()'s status and quick_exit()'s, as their handlers and hook saw them.
std::atomic<int> g_exit_status{0};
std::atomic<int> g_quick_exit_status{0};

void keep_exit_status(int status, void*) { g_exit_status.store(status); }
void end_at_quick_exit() { finish(fmt::EndReason::QuickExit, static_cast<uint64_t>(g_quick_exit_status.load()), 10000); }
}  // namespace

// Handlers run in reverse order of registration: registered before the program's own, these
// run after them (what the program's handlers allocate is recorded).
void install_quick_exit_handler() { at_quick_exit(end_at_quick_exit); }
void install_exit_status_handler() { on_exit(keep_exit_status, nullptr); }

namespace {
// MEMTIDE_CHECK_OPTIONS in a direct LD_PRELOAD run, as LSAN_OPTIONS: once the trace is
// whole, `memtide-cli check` judges it (its report on stderr: the program's stdout stays its
// own), and a program that exited 0 exits with the gate's status instead when the gate fails.
// memtide-cli is found beside the library's tree: ../bin, or ../../bin from lib/<multiarch>.
void self_check(const char* trace) {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&self_check), &info) || !info.dli_fname) return;
  static char cli[4096];
  const char* slash = std::strrchr(info.dli_fname, '/');
  const int dir_len = slash ? static_cast<int>(slash - info.dli_fname) : 1;
  const char* dir = slash ? info.dli_fname : ".";
  bool found = false;
  for (const char* up : {"/../bin/memtide-cli", "/../../bin/memtide-cli"}) {
    std::snprintf(cli, sizeof cli, "%.*s%s", dir_len, dir, up);
    if ((found = access(cli, X_OK) == 0)) break;
  }
  const int exit_status = g_exit_status.load() & 0xff;
  std::fflush(nullptr);  // (the program's output before the report)
  if (!found) {
    message("MEMTIDE_CHECK_OPTIONS: memtide-cli not found near %s: the trace %s was not checked", info.dli_fname, trace);
    if (exit_status == 0) _exit(2);
    return;
  }
  static char* env[4096];
  static char preload[4096], options[4096];
  env_without_own(environ, env, sizeof env / sizeof env[0] - 1, preload, sizeof preload);
  size_t n = 0;
  while (env[n]) ++n;
  std::snprintf(options, sizeof options, "MEMTIDE_CHECK_OPTIONS=%s", g_check_options);
  env[n] = options;
  env[n + 1] = nullptr;
  char check[] = "check";
  char* argv[] = {cli, check, const_cast<char*>(trace), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = -1;
  int status = 0;
  const int err = posix_spawn(&pid, cli, &actions, nullptr, argv, env);
  posix_spawn_file_actions_destroy(&actions);
  while (err == 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int gate = err != 0 ? 2 : WIFEXITED(status) ? WEXITSTATUS(status) : 2;
  if (gate != 0 && exit_status == 0) _exit(gate);  // (the program's own failure wins)
}
}  // namespace

void finish_detached() { finish(fmt::EndReason::Detach, 0, 10000); }

void finish_at_exit() {
  // The trace's name as it is now: a relative name was resolved in the directory the program
  // was in when it opened the file.
  static char trace[4096];
  if (g_check_options && recording.fd >= 0 && getpid() == recording.pid) {
    char fd_link[64];
    std::snprintf(fd_link, sizeof fd_link, "/proc/self/fd/%d", recording.fd);
    const ssize_t n = readlink(fd_link, trace, sizeof trace - 1);
    trace[n > 0 ? n : 0] = 0;
  }
  finish(fmt::EndReason::Exit, static_cast<uint64_t>(static_cast<unsigned>(g_exit_status.load()) & 0xff), 10000);
  if (trace[0]) self_check(trace);
}
void finish_immediate_exit(int status) {
  // A vfork child shares the parent's memory: its _exit is not the end of the parent's trace.
  if (getpid() != recording.pid) return;
  finish(fmt::EndReason::ImmediateExit, static_cast<uint64_t>(static_cast<unsigned>(status) & 0xff), 10000);
}
void on_quick_exit(int status) { g_quick_exit_status.store(status); }

namespace {
char* g_exec_env[4096];
char g_exec_preload[4096];
}  // namespace

char* const* on_exec_begin(char* const envp[]) {
  // In a vfork child (memory shared with the suspended parent, pid different) the recorder's
  // state is the parent's: leave it alone, only adjust the environment.
  if (getpid() == recording.pid) finish(fmt::EndReason::Exec, 0, 10000);
  if (recording.opts.follow || !envp) return envp;
  // --no-follow: the new program runs without the preload and the recorder's variables (also
  // when the program passes an environment of its own making).
  env_without_own(envp, g_exec_env, sizeof g_exec_env / sizeof g_exec_env[0], g_exec_preload, sizeof g_exec_preload);
  return g_exec_env;
}

void on_exec_failed() {
  // The program goes on as itself: continue the same file after its End{Exec} record.
  if (getpid() != recording.pid || recording.state.load() != kStopped || recording.fd >= 0) return;
  BusyScope busy;
  if (reopen_trace_file()) {
    recording.state.store(kActive);
    writer_start();
  }
}

namespace {

// The fork handlers hold every lock of the recorder across the fork, so the busy flag is raised
// in fork_prepare and lowered by the handler that runs after it, in parent or child.
void fork_prepare() {
  tls_busy_scope = 0;  // (restored by the BusyScope that may be around this, when it ends)
  ++tls_busy;
  // Lock order: start -> modules -> shared -> maps -> stacks -> unwind -> registry -> queue.
  pthread_mutex_lock(&g_start_mutex);
  pthread_mutex_lock(&modules_mutex);
  pthread_mutex_lock(&recording.shared_mutex);
  pthread_mutex_lock(&maps_mutex);
  pthread_mutex_lock(&stacks_mutex);
  pthread_mutex_lock(&unwind_mutex);
  pthread_mutex_lock(&recording.registry_mutex);
  pthread_mutex_lock(&recording.queue_mutex);
  sampling::fork_prepare();
}

void fork_parent() {
  sampling::fork_parent();
  pthread_mutex_unlock(&recording.queue_mutex);
  pthread_mutex_unlock(&recording.registry_mutex);
  pthread_mutex_unlock(&unwind_mutex);
  pthread_mutex_unlock(&stacks_mutex);
  pthread_mutex_unlock(&maps_mutex);
  pthread_mutex_unlock(&recording.shared_mutex);
  pthread_mutex_unlock(&modules_mutex);
  pthread_mutex_unlock(&g_start_mutex);
  MEMTIDE_CHECK(tls_busy > 0);
  --tls_busy;
}

// The child's own recording: a new trace, none of the parent's events, its own stacks and modules.
void restart_in_child() {
  begin_trace(TraceOrigin::kForkChild);
  append_process_info(&recording.shared);
  if (open_trace_file(/*child=*/true)) {
    modules_scan();
    writer_start();
  } else {
    recording.state.store(kStopped);
  }
}

void fork_child() {
  for (pthread_mutex_t* m : {&recording.queue_mutex, &recording.shared_mutex, &recording.registry_mutex, &maps_mutex,
                             &stacks_mutex, &unwind_mutex, &modules_mutex, &g_start_mutex, &trace_fd_mutex})
    mutex_init_in_child(m);
  pthread_cond_init(&recording.queue_cond, nullptr);
  sampling::fork_child();
  if (attached()) attach_fork_child();  // (the parent's attach is not the child's)
  else if (recording.state.load() == kActive && recording.started) restart_in_child();
  MEMTIDE_CHECK(tls_busy > 0);
  --tls_busy;
}

void install_fork_handlers() { pthread_atfork(fork_prepare, fork_parent, fork_child); }

// Every signal whose default action ends the process (but the real-time ones): a pipeline
// ends its producer by SIGPIPE, a time limit by SIGALRM or SIGXCPU.
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS,  SIGFPE,  SIGILL,  SIGABRT,   SIGTERM, SIGINT,  SIGQUIT,
                                 SIGHUP,  SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2,   SIGXCPU, SIGXFSZ, SIGVTALRM,
                                 SIGPROF, SIGSYS,  SIGTRAP, SIGPOLL, SIGSTKFLT, SIGPWR};

void on_fatal_signal(int sig) {
  // Flush what was recorded, then let the signal do what it would have done. Every signal is
  // blocked while this runs (sa_mask), so that no handler of the program's can take it out of
  // here (a SIGALRM handler that siglongjmps would have let the program survive an abort()),
  // and the signal, raised again with its default action, is unblocked alone: it ends the
  // process before any other pending signal is delivered.
  if (g_trace.writer.running && !pthread_equal(pthread_self(), g_trace.writer.thread)) finish(fmt::EndReason::Signal, static_cast<uint64_t>(sig), 3000);
  signal(sig, SIG_DFL);
  raise(sig);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
}

void install_signal_handlers() {
  for (int sig : kFatalSignals) {
    struct sigaction old;
    if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) continue;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sa.sa_flags = SA_RESETHAND | SA_ONSTACK;
    sigfillset(&sa.sa_mask);  // (on_fatal_signal)
    sigaction(sig, &sa, nullptr);
  }
}

}  // namespace

}  // namespace memtide::rec
