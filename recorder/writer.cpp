// The writer thread: takes sealed chunks from the queue, flushes every stream's committed
// bytes every flush interval (so a SIGKILL loses at most that much), samples the process
// counters, compresses and appends blocks to the trace file. The allocating threads never
// compress or write.
//
// A block's base registers (time, addr) are the stream's registers before its first byte. A
// chunk is one run of records (the owner's short forms name addresses anywhere in it): one
// block when the writer takes it whole, as a sealed chunk; a chunk taken in pieces (the flush
// of a chunk still being filled) is read, so that the writer knows the registers and rings at
// each cut, and each later piece's first records that name an address before it take their
// full form (fmt::cut_block).
#include <errno.h>  // program_invocation_short_name
#include <fcntl.h>
#include <signal.h>
#include <linux/membarrier.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "formats/encoder.h"
#include "formats/record_builders.h"
#include "formats/segment_set.h"
#include "recorder/checkpoint.h"
#include "recorder/process.h"
#include "recorder/own_heap.h"
#include "recorder/recorder.h"
#include "recorder/segments.h"
#include "recorder/state.h"
#include "recorder/trace_state.h"
#include "recorder/stream.h"
#include "recorder/trace_file.h"
#include "recorder/unwind.h"
#include "recorder/writer.h"

namespace memtide::rec {

// This trace's writer state (trace_state.h).
constexpr WriterTrace& g_writer = g_trace.writer;

// The file's watermarks are exact (kFileFlagExactWatermarks): this process registered for
// expedited private membarrier when the file was opened.
std::atomic<bool> g_exact_watermarks{false};

namespace {

// Frames [p, p + n) of stream `s` as one block and appends it. `end` (when known: the rest
// of a sealed chunk) gives the registers after the block; otherwise the records are parsed.
struct Registers {
  uint64_t time, addr;
};
// Frames [p, p + n) as one block with the given base registers and appends it.
void write_block(uint32_t stream, uint64_t base_time, uint64_t base_addr, const uint8_t* p, size_t n, uint16_t flags) {
  if (!n || g_trace.file.write_failed) return;
  const bool records = !(flags & (fmt::kBlockFlagCheckpoint | fmt::kBlockFlagCheckpointData | fmt::kBlockFlagPrologue));
  // A kept trace goes on in a new segment before a block that would fill this one (never
  // between a checkpoint's blocks).
  if (records && recording.opts.keep) {
    if (segment_due(fmt::block_bound(n))) rotate_segment();
    segment_checkpoint_check();
  }
  if (records) checkpoint_note_block(stream, base_time, base_addr, p, n, trace_file_bytes());
  if (records && recording.opts.keep) segment_tables_note(stream, base_time, base_addr, p, n, flags);
  fmt::BlockHeader h;
  h.flags = flags;
  h.stream = stream;
  h.base_time = base_time;
  h.base_addr = base_addr;
  const size_t need = fmt::block_bound(n);
  if (need > g_writer.out_cap) {
    const size_t cap = need < 256 * 1024 ? 256 * 1024 : need;
    auto* bigger = static_cast<uint8_t*>(mem_alloc(cap));
    if (!bigger) {
      stop_out_of_memory();
      return;
    }
    mem_free(g_writer.out);
    g_writer.out = bigger;
    g_writer.out_cap = cap;
  }
  const size_t total = fmt::encode_block(h, p, n, g_writer.out, g_writer.out_cap, recording.opts.compression);
  if (within_size_limit(total)) write_all(g_writer.out, total);
}

// A buffer of at least n bytes kept from call to call (nullptr without the memory for it; the
// smaller buffer is kept then).
uint8_t* scratch(uint8_t*& buf, size_t& cap, size_t n) {
  if (n > cap) {
    const size_t want = n < 256 * 1024 ? 256 * 1024 : n;
    auto* bigger = static_cast<uint8_t*>(mem_alloc(want));
    if (!bigger) return nullptr;
    mem_free(buf);
    buf = bigger;
    cap = want;
  }
  return buf;
}

uint64_t g_emitted = 0;  // emit() calls with records, for flush_pass

// The records of a sealed chunk taken whole (n bytes at p) split as cut_block does, by the
// places of its StackDefs that its owner listed (Chunk::def_at), without reading a record; false
// when the list is incomplete or a place does not fit (cut_block then reads the records).
bool split_listed(const Chunk* c, const uint8_t* p, size_t n, uint8_t* out, uint8_t* stacks, fmt::CutResult& r) {
  if (c->ndefs > kChunkDefs) return false;
  r = {};
  size_t from = 0;
  for (uint32_t i = 0; i < c->ndefs; ++i) {
    const size_t at = c->def_at[i], len = c->def_len[i];
    if (at < from || at > n || len > n - at) return false;
    std::memcpy(out + r.events, p + from, at - from);
    r.events += at - from;
    std::memcpy(stacks + r.stacks, p + at, len);
    r.stacks += len;
    from = at + len;
  }
  std::memcpy(out + r.events, p + from, n - from);
  r.events += n - from;
  return true;
}

// Writes chunk bytes [p, p + n) as a block: `at_start` when they are the chunk's first, `end`
// the stream's registers after them when they are the chunk's last (a sealed chunk), null when
// the chunk is still being filled (more pieces may follow). `sealed`: that chunk, when it is taken whole.
void emit(Stream* s, const uint8_t* p, size_t n, uint16_t flags, bool at_start, const Registers* end = nullptr,
          const Chunk* sealed = nullptr) {
  if (!n || g_trace.file.write_failed) return;
  ++g_emitted;
  if (at_start) s->w_run.rings.clear();
  const uint64_t base_time = s->w_run.time, base_addr = s->w_run.addr;
  MEMTIDE_CHECK(!end || end->time >= base_time);  // a stream's times never go back
  if (at_start && end && !(flags & fmt::kBlockFlagStacks)) {  // a whole chunk: one block as it is
    s->w_run.time = end->time;
    s->w_run.addr = end->addr;
    write_block(s->index, base_time, base_addr, p, n, flags);
    return;
  }
  // The StackDefs of a block that holds some go first, in a block of their own: readers of
  // the stacks alone (the symbolizer that follows a recording) then skip every event block
  // (a compiler's trace: 3.8 MB of definitions read instead of 39 MB of blocks holding them).
  uint8_t* const out = scratch(g_writer.cut, g_writer.cut_cap, fmt::cut_bound(n));
  uint8_t* const stacks = (flags & fmt::kBlockFlagStacks) ? scratch(g_writer.stacks, g_writer.stacks_cap, n) : nullptr;
  if (!out || ((flags & fmt::kBlockFlagStacks) && !stacks)) {
    stop_out_of_memory();
    return;
  }
  fmt::CutResult r;
  if (!(at_start && end && sealed && stacks && split_listed(sealed, p, n, out, stacks, r)))
    r = fmt::cut_block(p, n, s->w_run, out, stacks, /*whole=*/end == nullptr);
  if (end) {  // (the registers the owner kept are right even past a record that did not parse)
    s->w_run.time = end->time;
    s->w_run.addr = end->addr;
  }
  if (stacks) {
    write_block(s->index, base_time, base_addr, stacks, r.stacks, fmt::kBlockFlagStacks);  // untimed: same registers
    if (!r.rest_unread) flags &= static_cast<uint16_t>(~fmt::kBlockFlagStacks);
  }
  write_block(s->index, base_time, base_addr, out, r.events, flags);
}

// The block hint of chunk bytes [from, to): whether they may hold a StackDef. A record appended
// after `to` may have moved stacks_end already; that only flags a block needlessly.
uint16_t block_flags(const Chunk* c, uint32_t from, uint32_t to) {
  const uint32_t e = c->stacks_end.load(std::memory_order_relaxed);
  return e > from && c->stacks_begin.load(std::memory_order_relaxed) < to ? fmt::kBlockFlagStacks : 0;
}

// Takes the committed, not yet written bytes of the stream's current chunk.
void flush_current(Stream* s) {
  Chunk* c = __atomic_load_n(&s->chunk, __ATOMIC_ACQUIRE);
  if (!c || c->seq != s->w_next_seq) return;  // an older chunk is still queued
  const uint32_t end = c->committed.load(std::memory_order_acquire);
  if (end <= c->consumed) return;
  emit(s, c->data + c->consumed, end - c->consumed, block_flags(c, c->consumed, end), c->consumed == 0);
  c->consumed = end;
}

Chunk* take_queue() {
  pthread_mutex_lock(&recording.queue_mutex);
  Chunk* c = g_writer.queue_head;
  g_writer.queue_head = g_writer.queue_tail = nullptr;
  pthread_mutex_unlock(&recording.queue_mutex);
  return c;
}

// Sealed chunks waiting for the writer, in bytes. Above max_queued() an allocating thread waits
// (backpressure) rather than let the recorder's memory grow without bound. A flush pass drains
// the queue before its watermark, so this also bounds how far apart watermarks are when the
// writer cannot keep up (and the window a reader's merge holds). A kept trace's limit follows
// its size (an eighth, a segment's worth, at least 1 MiB): a backlog written at once spans
// segments with no checkpoint between them, and a set whose segments all came from one backlog
// cannot tell what was live at its start, nor hold events after its first checkpoint.
constexpr size_t kMaxQueued = 16u << 20;
size_t max_queued() {
  const uint64_t keep = recording.opts.keep;
  return keep ? static_cast<size_t>(std::clamp<uint64_t>(keep / 8, 1u << 20, kMaxQueued)) : kMaxQueued;
}
constexpr size_t kWakeQueued = 1u << 20;
pthread_cond_t g_space_cond = PTHREAD_COND_INITIALIZER;

// With queue_mutex held: one step of a wait for the writer (at most `ns` nanoseconds).
void wait_space_cond_locked(long ns) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_nsec += ns;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec += 1;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_cond_timedwait(&g_space_cond, &recording.queue_mutex, &ts);
}

// The writer has written nothing recorded in the last two flush intervals (it is starved of CPU,
// or still busy with a large pass): wait, in short steps, for a pass to begin and end.
void wait_for_pass() {
  const uint64_t limit = 2ull * recording.opts.flush_interval_ms * 1000000ull;
  const uint64_t up_to = g_writer.written_up_to.load(std::memory_order_relaxed);
  if (MT_LIKELY(!up_to || now_ns() - up_to <= limit)) return;
  pthread_mutex_lock(&recording.queue_mutex);
  pthread_cond_signal(&recording.queue_cond);
  for (int i = 0; i < 100 && g_writer.running && !g_writer.stop &&
                  g_writer.written_up_to.load(std::memory_order_relaxed) == up_to;
       ++i) {
    wait_space_cond_locked(5000000);
  }
  pthread_mutex_unlock(&recording.queue_mutex);
}

// With queue_mutex held: waits in short steps while the writer is far behind, and never once
// it stops (exit).
void wait_for_space_locked() {
  for (int i = 0; i < 200 && g_writer.running && !g_writer.stop &&
                  g_writer.queued.load(std::memory_order_relaxed) + checkpoint_backlog() > max_queued() / 2;
       ++i) {
    wait_space_cond_locked(20000000);
  }
}

}  // namespace

void wait_for_writer() {
  if (g_writer.queued.load(std::memory_order_relaxed) <= max_queued()) return;
  timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 2;
  if (pthread_mutex_timedlock(&recording.queue_mutex, &deadline) != 0) return;
  pthread_cond_signal(&recording.queue_cond);
  wait_for_space_locked();
  pthread_mutex_unlock(&recording.queue_mutex);
}

namespace {

// Writes the chunks of a list taken from the queue, in its order, and frees them.
void write_chunks(Chunk* c) {
  while (c) {
    Chunk* next = c->next;
    Stream* s = c->stream;
    const uint32_t end = c->committed.load(std::memory_order_acquire);
    const Registers regs{c->end_time, c->end_addr};
    if (end > c->consumed)
      emit(s, c->data + c->consumed, end - c->consumed, block_flags(c, c->consumed, end), c->consumed == 0, &regs, c);
    s->w_next_seq = c->seq + 1;
    if (c->last) s->w_done = true;
    g_writer.queued.fetch_sub(c->cap, std::memory_order_relaxed);
    mem_free(c);
    c = next;
  }
}

// `process_first`: the process stream's records, queued and current, before the others' chunks
// (each stream's in its order).
void drain_queue(bool process_first = false) {
  Chunk* list = take_queue();
  if (process_first) {
    Chunk *mine = nullptr, **mine_end = &mine, *rest = nullptr, **rest_end = &rest;
    for (Chunk* c = list; c; c = c->next) {
      Chunk**& end = c->stream == &recording.shared ? mine_end : rest_end;
      *end = c;
      end = &c->next;
    }
    *mine_end = *rest_end = nullptr;
    write_chunks(mine);
    flush_current(&recording.shared);
    list = rest;
  }
  write_chunks(list);
  pthread_mutex_lock(&recording.queue_mutex);
  pthread_cond_broadcast(&g_space_cond);
  pthread_mutex_unlock(&recording.queue_mutex);
}

// Flushes every stream; frees the state of threads that exited and were fully written.
// Returns the earliest time a record of theirs that is still not written may have (UINT64_MAX:
// none may be missing): for a stream whose older chunk is still on its way to the queue, or
// that the pass saw inside a record (barrier_and_mark), what is not written comes after its
// last written record, and (by the previous watermark) not before that watermark.
uint64_t flush_all() {
  uint64_t unwritten = UINT64_MAX;
  pthread_mutex_lock(&recording.registry_mutex);
  for (Stream* s = recording.registry; s;) {
    Stream* next = s->reg_next;
    if (s->w_done) {
      if (s->reg_prev) s->reg_prev->reg_next = s->reg_next;
      else recording.registry = s->reg_next;
      if (s->reg_next) s->reg_next->reg_prev = s->reg_prev;
      g_writer.exited_allocs += s->allocs;
      g_writer.exited_frees += s->frees;
      kept_table_free(reinterpret_cast<ThreadState*>(s)->memo.kept);
      mem_free(reinterpret_cast<ThreadState*>(s));  // Stream is ThreadState's first member
    } else {
      flush_current(s);
      const Chunk* c = __atomic_load_n(&s->chunk, __ATOMIC_ACQUIRE);
      if (!(c && c->seq == s->w_next_seq) || s->w_in_record) {
        const uint64_t from = s->w_run.time > g_writer.last_watermark ? s->w_run.time : g_writer.last_watermark;
        if (from < unwritten) unwritten = from;
      }
    }
    s = next;
  }
  pthread_mutex_unlock(&recording.registry_mutex);
  return unwritten;
}

// Returns false when no watermark could be written: stream 0 already holds a later record
// (a counter, or an event of a thread without its own stream), and a watermark there must not
// go back in time; a later one cannot be written either, as it would vouch for more than w.
bool append_watermark(uint64_t w) {
  uint8_t rec[24];
  Stream* s = &recording.shared;
  bool written = false;
  pthread_mutex_lock(&recording.shared_mutex);
  if (w >= s->last_time) {
    const size_t n = fmt::encode_watermark(rec, sizeof rec, s->last_time, fmt::Watermark{w});
    if (n && append_record(s, rec, n)) {
      s->last_time = w;
      written = true;
    }
  }
  pthread_mutex_unlock(&recording.shared_mutex);
  return written;
}

// The time a watermark taken now may vouch for: now, or less where a thread has a record
// timed earlier that it has not committed yet (Stream::pending_time).
uint64_t vouchable_time() {
  uint64_t w = now_ns();
  __builtin_ia32_lfence();  // the pending times are read after the clock
  std::atomic_thread_fence(std::memory_order_seq_cst);
  pthread_mutex_lock(&recording.registry_mutex);
  for (Stream* s = recording.registry; s; s = s->reg_next) {
    const uint64_t p = __atomic_load_n(&s->pending_time, __ATOMIC_ACQUIRE);
    if (p == 1) w = g_writer.last_watermark;  // its time is being read: it may be earlier than w
    else if (p && p < w) w = p;
  }
  pthread_mutex_unlock(&recording.registry_mutex);
  return w < g_writer.last_watermark ? g_writer.last_watermark : w;
}

// Exact watermarks. A pass takes its time T (vouchable_time), then runs membarrier: every
// thread of the process that runs on another CPU is interrupted, so a thread's stores made
// before that point are visible afterwards, and what it does after that point (its clock reads
// included) comes after T. So a record timed before T was either committed before the barrier
// (and the pass writes it, unless its chunk is still on its way to the queue) or is in
// progress, its in_record flag visible. Records of such streams that the pass cannot write
// come after the stream's last written record (w_run.time), so the watermark is lowered to that
// (flush_all).
// Threads not running at the barrier went through a context switch, which is a full barrier.
bool barrier_and_mark() {
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) return false;
  pthread_mutex_lock(&recording.registry_mutex);
  for (Stream* s = recording.registry; s; s = s->reg_next) s->w_in_record = __atomic_load_n(&s->in_record, __ATOMIC_ACQUIRE) != 0;
  pthread_mutex_unlock(&recording.registry_mutex);
  return true;
}

// Whether the stream has records the writer has not written: committed past what it took, or
// a chunk on its way to the queue.
bool stream_has_news(Stream* s) {
  const Chunk* c = __atomic_load_n(&s->chunk, __ATOMIC_ACQUIRE);
  if (!c) return false;
  if (c->seq != s->w_next_seq) return true;
  return c->committed.load(std::memory_order_acquire) > c->consumed;
}

// Whether a pass now would find nothing to write: no chunk queued, no stream with records
// not yet written and no exited thread to free.
bool nothing_to_flush() {
  if (stream_has_news(&recording.shared)) return false;
  pthread_mutex_lock(&recording.queue_mutex);
  const bool queued = g_writer.queue_head != nullptr;
  pthread_mutex_unlock(&recording.queue_mutex);
  if (queued) return false;
  bool news = false;
  pthread_mutex_lock(&recording.registry_mutex);
  for (Stream* s = recording.registry; s && !news; s = s->reg_next) news = s->w_done || stream_has_news(s);
  pthread_mutex_unlock(&recording.registry_mutex);
  return !news;
}

// Passes in a row that wrote no record and a watermark vouching for everything before them.
// Once a reader has what it needs to release every record written so far (an exact watermark
// after them; without exact watermarks, the next one after that), passes that would find
// nothing to write are not made: an idle program's trace does not grow by a watermark (and a
// block) per flush interval, nor does its writer run membarrier for nothing.
inline uint32_t quiet_passes_needed() { return g_exact_watermarks ? 1 : 2; }

// One full pass: sealed chunks, then every stream's current bytes, then a watermark that
// vouches for everything timed before the pass started (and before any record still pending).
// With exact watermarks it vouches for what it has written (above); without, only once the
// next watermark has been written (a thread may have timed a record and not yet committed it).
void flush_pass() {
  const uint64_t pass_began = now_ns();
  const uint64_t emitted = g_emitted;
  const bool shared_news = stream_has_news(&recording.shared);  // (before the watermark goes there)
  clock_tick();  // records begun after the barrier below read the clock (event_time)
  const uint64_t vouched = vouchable_time();
  uint64_t w = vouched;
  const bool exact = g_exact_watermarks && barrier_and_mark();
  drain_queue();
  const uint64_t unwritten = flush_all();
  if (exact && unwritten < w) w = unwritten;
  // (Without the barrier an exact file gets no watermark in this pass: readers wait longer.)
  const bool marked = (exact || !g_exact_watermarks) && append_watermark(w);
  MEMTIDE_CHECK(!marked || w >= g_writer.last_watermark);
  const uint64_t complete = exact ? w : g_writer.last_watermark;  // every record timed before it is written below
  if (marked) g_writer.last_watermark = w;
  const bool quiet = marked && w == vouched && !shared_news && g_emitted == emitted;
  g_writer.quiet_passes = quiet ? g_writer.quiet_passes + 1 : 0;
  flush_current(&recording.shared);
  g_writer.written_up_to.store(pass_began, std::memory_order_relaxed);
  if (marked && !g_writer.last_pass) checkpoint_pass(complete);  // (no checkpoint follows the last pass)
  pthread_mutex_lock(&recording.queue_mutex);  // (threads waiting for the pass, or the backlog to shrink)
  pthread_cond_broadcast(&g_space_cond);
  pthread_mutex_unlock(&recording.queue_mutex);
}

// An idle program (nothing to write at a flush, its counters unchanged) need not wake the writer
// a hundred times a second: each flush found idle doubles the flush and counter intervals, up
// to 2^kMaxIdleLevel times (160 ms between flushes by default), and the first wake that finds
// something to write brings them back. Meanwhile no event reuses a time (kEpochIdle), so the
// clock needs no tick.
constexpr unsigned kMaxIdleLevel = 3;

void set_idle_level(unsigned level) {
  if ((level != 0) != (g_writer.idle_level != 0)) {
    if (level) {
      g_clock_epoch.fetch_or(kEpochIdle, std::memory_order_seq_cst);
    } else {
      g_clock_epoch.fetch_and(~kEpochIdle, std::memory_order_seq_cst);
    }
  }
  g_writer.idle_level = level;
}

void* writer_main(void*) {
  tls_busy = 1;  // nothing this thread does is the program's
  tls_recorder_thread = true;
  note_recorder_thread();
  const uint64_t flush_ns = static_cast<uint64_t>(recording.opts.flush_interval_ms) * 1000000ull;
  const uint64_t counter_ns = static_cast<uint64_t>(recording.opts.counter_interval_ms) * 1000000ull;
  uint64_t next_flush = now_ns() + flush_ns;
  // The process stream's first records (ProcessInfo, the modules) are the file's first block: a
  // trace cut early (a full disk, a kill) still says what ran, and a kept set's segments
  // written before the first pass still repeat them in their prologues.
  drain_queue(/*process_first=*/true);
  tsc_calibrate_begin();
  bool calibrating = true;
  uint64_t next_counter = counter_ns ? now_ns() : ~0ull;
  uint64_t last_tick = now_ns();
  uint64_t last_pass = last_tick;
  g_writer.written_up_to.store(last_tick, std::memory_order_relaxed);
  bool counters_moved = false;  // since the last flush
  for (;;) {
    pthread_mutex_lock(&recording.queue_mutex);
    while (!g_writer.stop && !g_writer.queue_head) {
      const uint64_t now = now_ns();
      uint64_t wake = next_flush < next_counter ? next_flush : next_counter;
      if (calibrating) wake = std::min(wake, tsc_calibrate_due());
      // While events may reuse times, they are never older than the last wake (event_time);
      // a tick also gives the time back to whichever thread records alone after it.
      if (!(g_clock_epoch.load(std::memory_order_relaxed) & kEpochIdle))
        wake = std::min(wake, last_tick + kClockTickNs);
      if (now >= wake) break;
      timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      const uint64_t at = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec) + (wake - now);
      ts.tv_sec = static_cast<time_t>(at / 1000000000ull);
      ts.tv_nsec = static_cast<long>(at % 1000000000ull);
      pthread_cond_timedwait(&recording.queue_cond, &recording.queue_mutex, &ts);
    }
    const bool stop = g_writer.stop;
    pthread_mutex_unlock(&recording.queue_mutex);
    clock_tick();
    last_tick = now_ns();

    drain_queue();
    if (calibrating) calibrating = tsc_calibrate_step();
    const uint64_t now = now_ns();
    // A kept trace's new segment wants its checkpoint: passes come sooner until it is written
    // (segments may fill faster than the flush interval).
    if (checkpoint_pending() && !g_writer.idle_level) next_flush = std::min(next_flush, last_pass + flush_ns / 8);
    // The pass first: a counter sample in stream 0 timed after the pass's time would keep its
    // watermark, which must not go back in time there, from being written.
    if (!stop && now >= next_flush) {
      const bool idle = g_writer.quiet_passes >= quiet_passes_needed() && nothing_to_flush();
      if (!idle) {
        flush_pass();
        checkpoint_maybe_write(now_ns(), trace_file_bytes());
      } else {
        g_writer.written_up_to.store(now, std::memory_order_relaxed);
      }
      set_idle_level(idle && !counters_moved ? std::min(g_writer.idle_level + 1, kMaxIdleLevel) : 0);
      counters_moved = false;
      last_pass = now;
      next_flush = now + (flush_ns << g_writer.idle_level);
    } else if (g_writer.idle_level && !stop && !nothing_to_flush()) {
      // The program is back: the usual intervals, and a flush at once.
      set_idle_level(0);
      next_flush = now;
      if (counter_ns) next_counter = std::min(next_counter, now + counter_ns);
    }
    if (now >= next_counter) {
      counters_moved |= sample_counters(&recording.shared);
      next_counter = now + (counter_ns << g_writer.idle_level);
    }
    end_if_capped();
    if (stop) break;
  }
  // Final pass: everything recorded so far, the last counters, then the End record. Appending
  // them may fill the process stream's chunk, which then waits in the queue (with any chunk a
  // thread sealed since the pass): the queue is written first, as flush_current writes only a
  // stream's next chunk (without it, a trace lost its last counters and its End whenever they
  // did not fit in the chunk: a python3 run in twenty).
  // A kept trace's checkpoint still due is written first: the final pass's blocks then follow a
  // checkpoint of their own set, rather than fill its last segments with none (a burst that ends
  // with the program).
  if (checkpoint_pending()) {
    flush_pass();
    checkpoint_maybe_write(now_ns(), trace_file_bytes());
  }
  g_writer.last_pass = true;
  uint64_t allocs, frees;
  recorded_counts(allocs, frees);  // (before the pass: what they count is committed, so written below)
  flush_pass();
  if (counter_ns) sample_counters(&recording.shared, /*write=*/true);
  append_end(static_cast<fmt::EndReason>(g_writer.end_reason), g_writer.end_status, allocs, frees);
  drain_queue();
  flush_current(&recording.shared);
  end_if_capped();
  pthread_mutex_lock(&g_writer.done_mutex);
  g_writer.finished = true;
  pthread_cond_broadcast(&g_writer.done_cond);
  pthread_mutex_unlock(&g_writer.done_mutex);
  return nullptr;
}

}  // namespace

void enqueue_chunk(Chunk* c, bool may_wait) {
  c->next = nullptr;
  pthread_mutex_lock(&recording.queue_mutex);
  if (g_writer.queue_tail) g_writer.queue_tail->next = c;
  else g_writer.queue_head = c;
  g_writer.queue_tail = c;
  const size_t queued = g_writer.queued.fetch_add(c->cap, std::memory_order_relaxed) + c->cap;
  pthread_mutex_unlock(&recording.queue_mutex);
  // The writer wakes by itself at least every counter or flush interval and then writes what
  // is queued; it is woken early only when much is waiting. (Waking it for every chunk cost a
  // program like sqlite3, whose writer mostly sleeps, a futex wake-up of another CPU per 64 KiB
  // of records: not doing so saved it 2.8% of its wall time.) It is woken after the unlock: a
  // fatal signal is delivered on the way back from a system call, and its handler, which takes
  // this lock to have the End record written, found it held by the thread it had interrupted
  // (and waited its 3 s for nothing: a SIGTERM'd busy program lost its End one time in ten).
  if (queued >= kWakeQueued) pthread_cond_signal(&recording.queue_cond);
  // Backpressure: the writer is this far behind. Wait in short steps while it catches up, and
  // never once it stops (exit) or when the caller holds a lock the writer needs.
  if (may_wait && queued + checkpoint_backlog() > max_queued()) {
    pthread_mutex_lock(&recording.queue_mutex);
    wait_for_space_locked();
    pthread_mutex_unlock(&recording.queue_mutex);
  }
  if (may_wait) wait_for_pass();
}

void writer_write_block(uint32_t stream, uint64_t base_time, uint64_t base_addr, const uint8_t* p, size_t n,
                        uint16_t flags) {
  write_block(stream, base_time, base_addr, p, n, flags);
}

void writer_start() {
  tsc_probe();
  // The buffers that a chunk of the largest size needs, taken before the program goes on (it may
  // lower RLIMIT_AS first thing): a writer that could not get memory later (a program that takes
  // all there is) still writes what was recorded, and the End record.
  const size_t most = recording.chunk_max;
  if (!scratch(g_writer.out, g_writer.out_cap, fmt::block_bound(most)) || !scratch(g_writer.cut, g_writer.cut_cap, fmt::cut_bound(most)) ||
      !scratch(g_writer.stacks, g_writer.stacks_cap, most)) {
    message("out of memory for the trace's buffers; not recording");
    recording.state.store(kStopped, std::memory_order_release);
    return;
  }
  // The writer's timed waits are on CLOCK_MONOTONIC deadlines.
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&recording.queue_cond, &ca);
  pthread_cond_init(&g_space_cond, &ca);
  pthread_condattr_destroy(&ca);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  g_writer.stop = false;
  g_writer.running = spawn_recorder_thread(&g_writer.thread, &attr, writer_main, nullptr, /*keep_single=*/true) == 0;
  pthread_attr_destroy(&attr);
  if (!g_writer.running) {
    message("cannot start the writer thread; not recording");
    recording.state.store(kStopped, std::memory_order_release);
  }
}

void writer_finish(fmt::EndReason reason, uint64_t status, int timeout_ms) {
  if (!g_writer.running) return;
  // Timed locks: this may run in a signal handler that interrupted a lock holder.
  timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += (timeout_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  if (pthread_mutex_timedlock(&recording.queue_mutex, &deadline) != 0) return;
  const bool already = g_writer.stop;
  if (!already) {
    g_writer.end_reason = static_cast<int>(reason);
    g_writer.end_status = status;
    g_writer.stop = true;
    pthread_cond_signal(&recording.queue_cond);
  }
  pthread_mutex_unlock(&recording.queue_mutex);

  if (pthread_mutex_timedlock(&g_writer.done_mutex, &deadline) != 0) return;
  while (!g_writer.finished) {
    if (pthread_cond_timedwait(&g_writer.done_cond, &g_writer.done_mutex, &deadline) == ETIMEDOUT) break;
  }
  const bool finished = g_writer.finished;
  pthread_mutex_unlock(&g_writer.done_mutex);
  if (finished && !already) {
    pthread_join(g_writer.thread, nullptr);
    g_writer.running = false;
    close_trace_fd();
  }
}

}  // namespace memtide::rec
