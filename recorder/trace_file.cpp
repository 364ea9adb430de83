// The trace file: its name (patterns, never overwriting), its opening and header, the
// descriptor kept out of the program's way and checked before every write, the size limit
// (MEMTIDE_MAX_SIZE), and the End records. The writer thread (writer.cpp) writes through it.
//
// Sections:
//   [1] Writing: the descriptor's identity, the size limit
//   [2] End records
//   [3] Names and opening
//   [4] The descriptor and the program's calls on descriptors
//   [5] Segments (MEMTIDE_KEEP): rotation, removal of the oldest
#include "recorder/trace_file.h"
#include "recorder/trace_state.h"

#include <errno.h>  // program_invocation_short_name
#include <dirent.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "formats/checkpoint.h"
#include "formats/encoder.h"
#include "formats/record_builders.h"
#include "formats/segment_set.h"
#include "recorder/checkpoint.h"
#include "recorder/recorder.h"
#include "recorder/sampling.h"
#include "recorder/segment_helper.h"
#include "recorder/segments.h"
#include "recorder/state.h"
#include "recorder/stream.h"
#include "recorder/writer.h"

namespace memtide::rec {

pthread_mutex_t trace_fd_mutex = MT_MUTEX_INITIALIZER;

// This trace's file or kept set (trace_state.h).
constexpr FileTrace& g_file = g_trace.file;

// ---------------------------------------------------------------------------------------
// [1] Writing
// ---------------------------------------------------------------------------------------
namespace {

void remember_identity() {
  struct stat st;
  if (fstat(recording.fd, &st) == 0) {
    g_file.dev = st.st_dev;
    g_file.ino = st.st_ino;
  }
}

}  // namespace

void stop_writing(const char* why) {
  g_file.write_failed = true;
  message("cannot write %s: %s; recording stopped, the program goes on", recording.path, why);
  recording.state.store(kStopped, std::memory_order_release);
}

namespace {

// When the size limit (MEMTIDE_MAX_SIZE) stops the recording, the block that would have passed
// it and everything after it are dropped, and one more block, the End record's, is written in
// the room kept for it.
constexpr uint64_t kEndRoom = 256;

bool segment_first_name(char* name);

// The header of the file or segment being opened, in `h` (kSegmentHeaderSize bytes); returns
// its size: 32 bytes, 48 with the checkpoint pointer, 64 for a segment (its place in the set).
size_t make_header(uint8_t* h, uint64_t pointer) {
  const bool pointed = checkpoints_on();
  fmt::encode_file_header(h, fmt::kFileFlagBlockHints | (g_exact_watermarks ? fmt::kFileFlagExactWatermarks : 0) |
                                 (g_file.sampled_at_open ? fmt::kFileFlagSampled : 0) |
                                 (pointed ? fmt::kFileFlagCheckpoints : 0) | (g_file.segment ? fmt::kFileFlagSegment : 0));
  if (!pointed && !g_file.segment) return fmt::kFileHeaderSize;
  const uint32_t size = g_file.segment ? fmt::kSegmentHeaderSize : fmt::kCheckpointHeaderSize;
  wire::store_le<uint32_t>(h + 12, size);
  wire::store_le<uint32_t>(h + 28, fmt::checksum32(h, 28));
  fmt::encode_checkpoint_pointer(h + fmt::kCheckpointPointerAt, pointer);  // (formats/checkpoint.h)
  if (g_file.segment) fmt::encode_segment_fields(h, g_file.segment_base, g_file.segment);
  return size;
}

}  // namespace

namespace {

// The program closed the trace's descriptor with a direct system call (the interposed calls keep
// it), and its number may be one of the program's files by now: the trace is opened again by
// its path, if that is still the same file, so that what was recorded is still written.
bool reopen_trace() {
  const int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, recording.path, O_WRONLY | O_APPEND | O_CLOEXEC));
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_dev != g_file.dev || st.st_ino != g_file.ino) {
    syscall(SYS_close, fd);
    return false;
  }
  recording.fd = move_out_of_reach(fd);
  return true;
}

}  // namespace

void write_all(const uint8_t* p, size_t n) {
  if (g_file.write_failed) return;
  pthread_mutex_lock(&trace_fd_mutex);
  // The interposed close, close_range, closefrom, dup2 and dup3 keep the descriptor; one
  // closed all the same (a direct system call) may be reused for one of the program's own
  // files, which must never receive trace bytes.
  struct stat st;
  if ((fstat(recording.fd, &st) != 0 || st.st_dev != g_file.dev || st.st_ino != g_file.ino) && !reopen_trace()) {
    pthread_mutex_unlock(&trace_fd_mutex);
    stop_writing("the program closed the trace file's descriptor");
    return;
  }
  const char* failed = nullptr;
  while (n) {
    const ssize_t w = write(recording.fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      failed = w < 0 ? strerror(errno) : "short write";
      break;
    }
    p += w;
    n -= static_cast<size_t>(w);
    g_file.bytes += static_cast<uint64_t>(w);
  }
  pthread_mutex_unlock(&trace_fd_mutex);
  if (failed) stop_writing(failed);
}

namespace {

// The next block would pass the size limit: recording stops, the program goes
// on; the writer ends the trace with an End record (write_capped_end).
void reach_size_limit() {
  g_file.capped = true;
  g_file.capped_reason = fmt::EndReason::Detached;
  g_file.write_failed = true;
  recording.state.store(kStopped, std::memory_order_release);
  message("%s reached its size limit (%llu bytes, MEMTIDE_MAX_SIZE): recording stopped, the program goes on", recording.path,
          static_cast<unsigned long long>(recording.opts.max_size));
}

}  // namespace

void stop_out_of_memory() {
  if (g_file.write_failed) return;
  g_file.capped = true;
  g_file.capped_reason = fmt::EndReason::Error;
  g_file.write_failed = true;
  recording.state.store(kStopped, std::memory_order_release);
  message("out of memory for the trace's buffers: recording stopped, the program goes on");
}

uint64_t trace_file_bytes() { return g_file.bytes; }

namespace {
}  // namespace

void set_checkpoint_pointer(uint64_t head) {
  g_file.last_head = head;
  if (!g_file.pointer_ok || g_file.write_failed) return;
  uint8_t p[fmt::kCheckpointPointerSize];
  fmt::encode_checkpoint_pointer(p, head);
  pthread_mutex_lock(&trace_fd_mutex);
  // (A torn write is seen by its checksum: readers then scan the block headers.)
  if (pwrite(recording.fd, p, sizeof p, fmt::kCheckpointPointerAt) != static_cast<ssize_t>(sizeof p)) g_file.pointer_ok = false;
  pthread_mutex_unlock(&trace_fd_mutex);
}

bool within_size_limit(size_t total) {
  if (recording.opts.max_size && g_file.bytes + total + kEndRoom > recording.opts.max_size) {
    reach_size_limit();
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// [2] End records
// ---------------------------------------------------------------------------------------
namespace {

bool membarrier_register() {
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

}  // namespace

void recorded_counts(uint64_t& allocs, uint64_t& frees) {
  allocs = g_trace.writer.exited_allocs;
  frees = g_trace.writer.exited_frees;
  pthread_mutex_lock(&recording.registry_mutex);
  for (Stream* s = recording.registry; s; s = s->reg_next) {
    allocs += __atomic_load_n(&s->allocs, __ATOMIC_RELAXED);
    frees += __atomic_load_n(&s->frees, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&recording.registry_mutex);
}

void append_end(fmt::EndReason reason, uint64_t status, uint64_t allocs, uint64_t frees) {
  uint8_t rec[64];
  Stream* s = &recording.shared;
  pthread_mutex_lock(&recording.shared_mutex);
  const uint64_t t = stream_time(s, now_ns());
  const size_t n = fmt::encode_end(rec, sizeof rec, s->last_time, fmt::End{t, reason, status, allocs, frees, g_trace.lost_events.load(std::memory_order_relaxed)});
  if (n && append_record(s, rec, n)) s->last_time = t;
  pthread_mutex_unlock(&recording.shared_mutex);
}

// Ends a trace the size limit stopped (an End record of reason Detached: stopped on request, in
// the room kept for it) or a lack of memory stopped (reason Error): the End in a block of its
// own, built on the stack, timed after every record of stream 0; then lets go of the file's
// lock, so that readers (memtide run's follower) know it is final while the program goes on. No
// lock is held by the caller.
void end_if_capped() {
  if (!g_file.capped || g_file.capped_ended) return;
  g_file.capped_ended = true;
  uint64_t allocs, frees;
  recorded_counts(allocs, frees);
  Stream* s = &recording.shared;
  const uint64_t now = now_ns();
  const uint64_t t = now > s->w_run.time ? now : s->w_run.time;  // w_run.time: past every stream-0 record
  uint8_t rec[64];
  const size_t n =
      fmt::encode_end(rec, sizeof rec, s->w_run.time, fmt::End{t, g_file.capped_reason, 0, allocs, frees, 0});
  fmt::BlockHeader h;
  h.stream = 0;
  h.base_time = s->w_run.time;
  h.base_addr = s->w_run.addr;
  uint8_t block[fmt::kBlockHeaderSize + 2 * sizeof rec + 64];  // >= block_bound(sizeof rec)
  const size_t total = n ? fmt::encode_block(h, rec, n, block, sizeof block, 0) : 0;
  if (total && (!recording.opts.max_size || g_file.bytes + total <= recording.opts.max_size)) {
    g_file.write_failed = false;
    write_all(block, total);
    g_file.write_failed = true;
  }
  flock(recording.fd, LOCK_UN);
}

// ---------------------------------------------------------------------------------------
// [3] Names and opening
// ---------------------------------------------------------------------------------------
namespace {

// `name` with ".<n>" before its extension (`t.mtide` -> `t.<n>.mtide`), or at its end when its
// last component has none: a numbered trace still ends in .mtide. `out` may be `name`; a
// name that would not fit leaves `out` as it was.
void with_suffix(const char* name, char* out, size_t cap, long n) {
  char tail[256] = "";
  const char* slash = std::strrchr(name, '/');
  const char* last = slash ? slash + 1 : name;
  const char* dot = std::strrchr(last, '.');
  size_t stem = std::strlen(name);
  if (dot && dot != last && std::strlen(dot) < sizeof tail) {  // (".hidden" has no extension)
    std::snprintf(tail, sizeof tail, "%s", dot);
    stem = static_cast<size_t>(dot - name);
  }
  char buf[4096 + 64];
  const int w = std::snprintf(buf, sizeof buf, "%.*s.%ld%s", static_cast<int>(stem), name, n, tail);
  if (w > 0 && static_cast<size_t>(w) < cap) std::memcpy(out, buf, static_cast<size_t>(w) + 1);
}

// Builds the file name from the pattern: %p pid, %e program name, %% a percent sign.
// %e is the program as it was started (argv[0]'s file name: redis-server, not the file its
// symlink names), else the executable's file name.
void expand_pattern(const char* pattern, bool child, char* out, size_t cap) {
  char exe[4096];
  const char* base = program_invocation_short_name;
  if (!base || !*base) {
    const ssize_t en = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[en > 0 ? en : 0] = 0;
    base = std::strrchr(exe, '/');
    base = base ? base + 1 : exe;
  }
  size_t n = 0;
  bool had_pid = false;
  for (const char* p = pattern; *p && n + 1 < cap; ++p) {
    if (*p == '%' && (p[1] == 'p' || p[1] == 'e' || p[1] == '%')) {
      ++p;
      int w = 0;
      if (*p == 'p') {
        w = std::snprintf(out + n, cap - n, "%d", static_cast<int>(getpid()));
        had_pid = true;
      } else if (*p == 'e') {
        w = std::snprintf(out + n, cap - n, "%s", base);
      } else {
        w = std::snprintf(out + n, cap - n, "%%");
      }
      if (w > 0) n += static_cast<size_t>(w);
      continue;
    }
    out[n++] = *p;
  }
  out[n < cap ? n : cap - 1] = 0;
  if (child && !had_pid) with_suffix(out, out, cap, getpid());
}

}  // namespace

bool open_trace_file(bool child) {
  char base[sizeof recording.path - 16];
  expand_pattern(recording.opts.output, child, base, sizeof base);
  // Never overwrite: a name that exists (an exec'd image with the same pid, a reused pid)
  // gets a numeric suffix. `memtide run -o FILE` removes FILE before the program starts.
  int fd = -1;
  char name[sizeof recording.path];
  for (int i = 0; i < 1000 && fd < 0; ++i) {
    if (i == 0) std::snprintf(name, sizeof name, "%s", base);
    else with_suffix(base, name, sizeof name, i);
    // A kept trace is named by its first segment; its base name must not be a file either.
    if (recording.opts.keep && !segment_first_name(name)) continue;
    std::snprintf(recording.path, sizeof recording.path, "%s", name);
    fd = open(recording.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    message("cannot create trace file %s: %s; not recording", recording.path, strerror(errno));
    return false;
  }
  fd = high_trace_fd(fd);
  flock(fd, LOCK_EX | LOCK_NB);  // readers tell a live trace by this lock
  recording.fd = fd;
  remember_identity();

  g_exact_watermarks = membarrier_register();
  g_file.sampled_at_open = sampling::active();
  g_file.pointer_ok = checkpoints_on();
  uint8_t header[fmt::kSegmentHeaderSize];
  write_all(header, make_header(header, 0));

  if (const char* manifest = recording.manifest) {
    const int mfd = open(manifest, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (mfd >= 0) {
      char line[sizeof recording.path + 64];
      const int n = std::snprintf(line, sizeof line, "%d\t%d\t%s\n", static_cast<int>(getpid()),
                                  static_cast<int>(getppid()), g_file.segment ? g_file.set_name : recording.path);
      if (n > 0) (void)!write(mfd, line, static_cast<size_t>(n));
      close(mfd);
    }
  }
  return !g_file.write_failed;
}

// ---------------------------------------------------------------------------------------
// [4] The descriptor
// ---------------------------------------------------------------------------------------
bool reopen_trace_file() {
  const int fd = open(recording.path, O_WRONLY | O_APPEND | O_CLOEXEC);
  g_file.pointer_ok = false;  // (pwrite would append)
  if (fd < 0) return false;
  recording.fd = high_trace_fd(fd);
  flock(recording.fd, LOCK_EX | LOCK_NB);
  remember_identity();
  return true;
}

int high_trace_fd(int fd) { return move_out_of_reach(fd); }

void close_trace_fd() {
  pthread_mutex_lock(&trace_fd_mutex);
  const int fd = recording.fd;
  recording.fd = -1;
  pthread_mutex_unlock(&trace_fd_mutex);
  if (fd >= 0) syscall(SYS_close, fd);
}

bool is_trace_fd(int fd) { return fd >= 0 && fd == __atomic_load_n(&recording.fd, __ATOMIC_RELAXED); }
int trace_fd() { return __atomic_load_n(&recording.fd, __ATOMIC_RELAXED); }

void move_trace_fd() {
  pthread_mutex_lock(&trace_fd_mutex);
  if (recording.fd >= 0) {
    // The old number is left to the program's dup2, which replaces it in one step.
    const int moved = dup_out_of_reach(recording.fd);
    if (moved >= 0) __atomic_store_n(&recording.fd, moved, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&trace_fd_mutex);
}

void own_pipe_made(int fds[2]) {
  fds[0] = move_out_of_reach(fds[0], kTraceFdSpare);
  fds[1] = move_out_of_reach(fds[1], kTraceFdSpare);
}

int program_dupfd(int fd, int cmd, long min) {
  if (is_trace_fd(fd)) {  // not open, as far as the program knows
    errno = EBADF;
    return -1;
  }
  const int r = sys_fcntl(fd, cmd, min);
  const int t = trace_fd();
  // Untraced, the lowest free number from `min` up would have been the trace's: the kernel
  // gave a higher one, or none (EMFILE). The trace's descriptor moves, the program gets its.
  if (t < 0 || min < 0 || min > t || (r >= 0 && r < t) || (r < 0 && errno != EMFILE)) return r;
  const int saved_errno = errno;
  const int flags = cmd == F_DUPFD_CLOEXEC ? O_CLOEXEC : 0;
  int result = r;
  pthread_mutex_lock(&trace_fd_mutex);
  if (recording.fd == t) {
    const int moved = dup_out_of_reach(t);
    if (moved >= 0) {
      __atomic_store_n(&recording.fd, moved, __ATOMIC_RELAXED);
      // Replaces the old number in one step (no other thread can take it meanwhile).
      if (syscall(SYS_dup3, r >= 0 ? r : fd, t, flags) == t) {
        result = t;
        if (r >= 0) syscall(SYS_close, r);
      } else {
        syscall(SYS_close, t);
        result = r;
      }
    }
  }
  pthread_mutex_unlock(&trace_fd_mutex);
  if (result < 0) errno = saved_errno;
  return result;
}

// ---------------------------------------------------------------------------------------
// [5] Segments
// ---------------------------------------------------------------------------------------
// A kept trace is written as segments of at most keep/8 bytes of events; when one is full the
// writer opens the next, writes its header and prologue (segments.h), lets the full one go and
// removes the oldest while the closed ones and a full current one would pass keep. Readers open
// the set (formats/segment_set.h) and replay it from its first checkpoint. A small checkpoint is
// written with each segment; one of a large live set (a quarter of a segment or more) only as
// often as the set needs to hold one with events after it (segment_checkpoint_check), and the
// segments the newest one's replay needs stay until a newer one is written, as long as the set
// stays within keep and a segment.
namespace {

void segment_path(char* out, size_t cap, uint32_t n) { std::snprintf(out, cap, "%s.%04u.mtide", g_file.stem, n); }

// Whether the directory of `stem` holds a segment of it (STEM.<digits>.mtide): a set of an
// earlier recording, which a new one of that name would mix with. Read with getdents64 into
// a buffer on the stack (opendir would allocate).
bool stem_has_segments(const char* stem) {
  const char* slash = std::strrchr(stem, '/');
  char dir[sizeof recording.path];
  std::snprintf(dir, sizeof dir, "%.*s", slash ? static_cast<int>(slash == stem ? 1 : slash - stem) : 1, slash ? stem : ".");
  const char* prefix = slash ? slash + 1 : stem;
  const size_t plen = std::strlen(prefix);
  const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  alignas(8) char buf[8192];
  bool found = false;
  for (long n; !found && (n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0;) {
    for (long at = 0; at < n && !found;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf + at);
      const char* e = d->d_name;
      const size_t len = std::strlen(e);
      if (len > plen + 7 && std::strncmp(e, prefix, plen) == 0 && e[plen] == '.' && std::strcmp(e + len - 6, ".mtide") == 0) {
        size_t digits = 0;
        while (plen + 1 + digits < len - 6 && e[plen + 1 + digits] >= '0' && e[plen + 1 + digits] <= '9') ++digits;
        found = digits >= 4 && plen + 1 + digits == len - 6;
      }
      at += d->d_reclen;
    }
  }
  syscall(SYS_close, fd);
  return found;
}

// `name` (a candidate of open_trace_file) turned into its set's first segment's name; false when
// it would not fit, its base name is a file (opening the set by it would open that file), or
// segments of that name are there.
bool segment_first_name(char* name) {
  const size_t n = std::strlen(name);
  const size_t stem = n > 6 && std::strcmp(name + n - 6, ".mtide") == 0 ? n - 6 : n;
  if (stem >= sizeof g_file.stem) return false;
  std::snprintf(g_file.stem, sizeof g_file.stem, "%.*s", static_cast<int>(stem), name);
  std::snprintf(g_file.set_name, sizeof g_file.set_name, "%s.mtide", g_file.stem);
  if (access(g_file.set_name, F_OK) == 0 || stem_has_segments(g_file.stem)) return false;
  g_file.segment = 1;
  g_file.segment_base = 0;
  segment_path(name, sizeof recording.path, 1);
  return true;
}

// Whether the segment numbered `n` (not the current one) is wholly before what the newest
// checkpoint's replay needs.
bool before_base(uint32_t n) { return g_file.segment_start[(n + 1) % kClosedSlots] <= g_file.base_from; }

void remove_oldest() {
  const uint64_t keep = recording.opts.keep, room = keep / 8;
  const bool guard = checkpoints_on();
  // A checkpoint of under a quarter of a segment (or the first) is due with each segment; a
  // larger one as segment_checkpoint_check says.
  if (guard && g_file.base_bytes < room / 4) checkpoint_due(g_file.events_from);
  while (g_file.oldest < g_file.segment && (g_file.closed_total + room > keep || g_file.segment - g_file.oldest >= kClosedSlots)) {
    // (The set's start stays until a newer checkpoint is written, as long as the set stays
    // within keep and a segment.)
    if (guard && !before_base(g_file.oldest) && g_file.closed_total <= keep && g_file.segment - g_file.oldest < kClosedSlots) return;
    char path[sizeof recording.path];
    segment_path(path, sizeof path, g_file.oldest);
    // (A reader that has it open still reads it.)
    if (unlink(path) != 0 && (errno == EACCES || errno == EPERM)) segment_helper_remove(path);
    g_file.closed_total -= g_file.closed_bytes[g_file.oldest % kClosedSlots];
    ++g_file.oldest;
  }
}

}  // namespace

void segment_checkpoint_check() {
  // Checkpoints C bytes each, S bytes of the trace apart, in a set of K bytes whose segments go
  // a segment (R bytes) at a time: when one is written the one before stays while what followed
  // it is under K - 2C - S - R, so S = (K - 2C - R) / 2 keeps the older of two in the set, with S
  // bytes of events after it at the least. (Checkpoints the set cannot hold two of, said in
  // segment_checkpoint_written, are written every checkpoint interval only.)
  const uint64_t keep = recording.opts.keep, room = keep / 8;
  if (!g_file.segment || g_file.base_bytes < room / 4 || g_file.keep_too_small || !checkpoints_on() || checkpoint_pending()) return;
  const uint64_t two = 2 * g_file.base_bytes + room;
  const uint64_t spacing = std::max(room / 2, two < keep ? (keep - two) / 2 : 0);
  if (g_file.bytes - g_file.base_end >= spacing) checkpoint_due(g_file.bytes);
}

void segment_checkpoint_written(uint64_t replay_from, uint64_t bytes) {
  if (!g_file.segment) return;
  g_file.base_from = replay_from;
  g_file.base_bytes = bytes;
  g_file.base_end = g_file.bytes;
  const uint64_t keep = recording.opts.keep;
  g_file.keep_too_small = 2 * bytes + keep / 8 > keep;
  if (g_file.keep_too_small && !g_file.small_keep_said) {
    g_file.small_keep_said = true;
    message("--keep %llu bytes cannot hold two checkpoints of the live blocks (%llu bytes each) and a segment: "
            "checkpoints are written every checkpoint interval only while it is so, and the kept set may start "
            "with none; a --keep of 4 times the checkpoint keeps a range",
            static_cast<unsigned long long>(keep), static_cast<unsigned long long>(bytes));
  }
}

bool segment_due(size_t total) {
  return g_file.segment && !g_file.rotating && !g_file.write_failed && g_file.bytes > g_file.events_from &&
         g_file.bytes - g_file.segment_base + total > recording.opts.keep / 8;
}

void rotate_segment() {
  if (g_file.rotating) return;
  g_file.rotating = true;
  char path[sizeof recording.path];
  segment_path(path, sizeof path, g_file.segment + 1);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  // A program that dropped the privileges the directory needs: memtide run's helper creates it.
  if (fd < 0 && (errno == EACCES || errno == EPERM)) {
    const int denied = errno;
    fd = segment_helper_create(path);
    if (fd < 0) errno = denied;
  }
  if (fd < 0) {
    g_file.rotating = false;
    g_file.write_failed = true;
    message("cannot create the trace's next segment %s: %s; recording stopped, the program goes on", path, strerror(errno));
    recording.state.store(kStopped, std::memory_order_release);
    return;
  }
  fd = high_trace_fd(fd);
  flock(fd, LOCK_EX | LOCK_NB);  // before the last one's lock goes: readers see the set written throughout
  const uint64_t base = g_file.bytes;
  const uint64_t closed = base - g_file.segment_base;
  const uint32_t old_segment = g_file.segment;
  ++g_file.segment;
  g_file.segment_base = base;
  uint8_t header[fmt::kSegmentHeaderSize];
  const size_t hn = make_header(header, g_file.last_head);
  if (write(fd, header, hn) != static_cast<ssize_t>(hn)) {
    const int err = errno;
    syscall(SYS_close, fd);
    unlink(path);
    g_file.segment = old_segment;
    g_file.rotating = false;
    g_file.write_failed = true;
    message("cannot write the trace's next segment %s: %s; recording stopped, the program goes on", path,
            err ? strerror(err) : "short write");
    recording.state.store(kStopped, std::memory_order_release);
    return;
  }
  pthread_mutex_lock(&trace_fd_mutex);
  const int old = recording.fd;
  recording.fd = fd;
  std::snprintf(recording.path, sizeof recording.path, "%s", path);
  remember_identity();
  g_file.bytes = base + hn;
  pthread_mutex_unlock(&trace_fd_mutex);
  if (old >= 0) syscall(SYS_close, old);
  g_file.closed_bytes[old_segment % kClosedSlots] = closed;
  g_file.closed_total += closed;
  g_file.segment_start[g_file.segment % kClosedSlots] = base;
  segment_write_prologue();
  g_file.events_from = g_file.bytes;
  remove_oldest();
  g_file.rotating = false;
}

}  // namespace memtide::rec
