// The life of a trace (trace_state.h): begin_trace builds g_trace anew for each trace.
#include "recorder/trace_state.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <new>

#include "recorder/attach.h"
#include "recorder/clock.h"
#include "recorder/sampling.h"
#include "recorder/state.h"
#include "recorder/stream.h"
#include "recorder/trace_file.h"
#include "recorder/unwind.h"

namespace memtide::rec {

TraceState g_trace;

namespace {

// What the last trace holds on the recorder's heap goes back to it (in a fork child, the copy
// of the parent's). The stack index and trie are dropped, not freed: a thread of the program
// that began an event before the recording stopped may still be reading them.
void give_back(TraceState& t) {
  t.checkpoint.release();
  t.segments.process.release();
  t.segments.stacks.release();
  for (size_t i = 0; i < t.segments.nmodules; ++i) t.segments.modules[i].rest.release();
  mem_free(t.segments.modules);
  mem_free(t.segments.scratch);
  mem_free(t.writer.out);
  mem_free(t.writer.cut);
  mem_free(t.writer.stacks);
  if (t.counters.statm_fd >= 0) syscall(SYS_close, t.counters.statm_fd);
}

}  // namespace

void begin_trace(TraceOrigin origin) {
  const uint32_t next_stream = g_trace.next_stream.load(std::memory_order_relaxed);
  give_back(g_trace);
  new (&g_trace) TraceState();
  g_trace.origin = origin;
  g_trace.start_time = now_ns();
  g_trace.checkpoint.last_time = g_trace.start_time;
  g_trace.checkpoint.interval = sampling::g_interval.load(std::memory_order_relaxed);
  stream_init(&recording.shared, 0, g_trace.start_time);
  sampling::trace_begins();
  switch (origin) {
    case TraceOrigin::kProgramStart:
    case TraceOrigin::kAttach:
      break;
    case TraceOrigin::kForkChild:
      // The child's one thread: the parent's threads, their streams, their unwind tables and
      // the parent's trace file are the parent's.
      recording.pid = getpid();
      recording.registry = nullptr;
      tls_thread = nullptr;
      tls_exited = 0;
      g_clock_epoch.store(0);
      g_kept_tables.store(0);
      close_trace_fd();
      break;
    case TraceOrigin::kReattach:
      // The program's threads keep their states: each starts a new stream, as its first event
      // would make it, with no stack id of the last trace, and keeps its stream's index.
      g_trace.next_stream.store(next_stream, std::memory_order_relaxed);
      attach_restart_streams();
      break;
  }
}

}  // namespace memtide::rec
