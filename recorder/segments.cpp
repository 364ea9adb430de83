// The tables of a kept trace's segments (segments.h). Kept as the records' own bytes: the
// ProcessInfo and StackDefs (untimed) as they are, each loaded module as its time and the fields
// after its time delta, re-timed when written. What they cost: a walk of the process stream's
// blocks and the stack definitions' (not the threads' event blocks), and their bytes once more
// at the start of every segment.
#include "recorder/segments.h"

#include "formats/decoder.h"
#include "formats/segment_set.h"
#include "formats/wire.h"
#include "recorder/base.h"
#include "recorder/trace_file.h"
#include "recorder/trace_state.h"
#include "recorder/writer.h"

namespace memtide::rec {

bool SegmentTables::Bytes::append(const uint8_t* p, size_t n) {
  if (size + n > cap) {
    size_t c = cap ? cap * 2 : 64 * 1024;
    while (c < size + n) c *= 2;
    auto* d = static_cast<uint8_t*>(mem_alloc_uninit(c));
    if (!d) return false;
    if (size) __builtin_memcpy(d, data, size);
    mem_free(data);
    data = d;
    cap = c;
  }
  __builtin_memcpy(data + size, p, n);
  size += n;
  return true;
}

namespace {

using Bytes = SegmentTables::Bytes;
using Module = SegmentTables::Module;

struct Seen : fmt::NullVisitor {
  enum : uint8_t { kOther, kProcess, kLoad, kUnload, kStack } kind = kOther;
  uint64_t id = 0, time = 0;
  void on_process_info(uint32_t, const fmt::ProcessInfo&) { kind = kProcess; }
  void on_module_load(uint32_t, const fmt::ModuleLoad& m) {
    kind = kLoad;
    id = m.module_id;
    time = m.time;
  }
  void on_module_unload(uint32_t, const fmt::ModuleUnload& m) {
    kind = kUnload;
    id = m.module_id;
  }
  void on_stack_def(uint32_t, const fmt::StackDef&) { kind = kStack; }
};

bool add_module(uint64_t id, uint64_t time, const uint8_t* rec, size_t n) {
  // A length-prefixed record: tag, varint length, then its payload, whose first field is dt.
  wire::Cursor c(rec + 1, rec + n);
  uint64_t len, dt;
  if (!c.get_varint(len) || !c.get_varint(dt)) return true;
  if (g_trace.segments.nmodules == g_trace.segments.modules_cap) {
    const size_t cap = g_trace.segments.modules_cap ? g_trace.segments.modules_cap * 2 : 64;
    auto* m = static_cast<Module*>(mem_alloc(cap * sizeof(Module)));
    if (!m) return false;
    if (g_trace.segments.nmodules) __builtin_memcpy(m, g_trace.segments.modules, g_trace.segments.nmodules * sizeof(Module));
    mem_free(g_trace.segments.modules);
    g_trace.segments.modules = m;
    g_trace.segments.modules_cap = cap;
  }
  Module& m = g_trace.segments.modules[g_trace.segments.nmodules];
  m = Module{id, time, {}};
  if (!m.rest.append(c.pos(), static_cast<size_t>(rec + n - c.pos()))) return false;
  ++g_trace.segments.nmodules;
  return true;
}

void remove_module(uint64_t id) {
  for (size_t i = 0; i < g_trace.segments.nmodules; ++i) {
    if (g_trace.segments.modules[i].id != id) continue;
    g_trace.segments.modules[i].rest.release();
    __builtin_memmove(&g_trace.segments.modules[i], &g_trace.segments.modules[i + 1], (g_trace.segments.nmodules - i - 1) * sizeof(Module));
    --g_trace.segments.nmodules;
    return;
  }
}

// Bytes of a prologue block being filled.
constexpr size_t kPrologueBlock = 1u << 20;

}  // namespace

void segment_tables_note(uint32_t stream, uint64_t base_time, uint64_t base_addr, const uint8_t* p, size_t n,
                         uint16_t flags) {
  if (g_trace.segments.failed || !(stream == 0 || (flags & fmt::kBlockFlagStacks))) return;
  if (!g_trace.segments.scratch && !(g_trace.segments.scratch = static_cast<fmt::DecodeScratch*>(mem_alloc(sizeof(fmt::DecodeScratch))))) {
    g_trace.segments.failed = true;
    return;
  }
  fmt::StreamRegs r;
  r.time = base_time;
  r.addr = base_addr;
  for (const uint8_t *q = p, *end = p + n; q < end;) {
    const uint8_t* rec = q;
    Seen v;
    if (fmt::decode_record(q, end, r, stream, *g_trace.segments.scratch, v) != fmt::DecodeError::None) break;
    bool ok = true;
    switch (v.kind) {
      case Seen::kProcess:
        if (!g_trace.segments.process.size) ok = g_trace.segments.process.append(rec, static_cast<size_t>(q - rec));
        break;
      case Seen::kLoad: ok = add_module(v.id, v.time, rec, static_cast<size_t>(q - rec)); break;
      case Seen::kUnload: remove_module(v.id); break;
      case Seen::kStack: ok = g_trace.segments.stacks.append(rec, static_cast<size_t>(q - rec)); break;
      default: break;
    }
    if (!ok) {
      g_trace.segments.failed = true;
      message("out of memory for the tables of the trace's segments: later segments will lack some stacks or modules");
      return;
    }
  }
}

void segment_write_prologue() {
  constexpr uint16_t kFlags = fmt::kBlockFlagPrologue;
  // The process stream's records: ProcessInfo, then the modules loaded, in their order and times.
  Bytes b;
  uint64_t base_time = g_trace.segments.nmodules ? g_trace.segments.modules[0].time : 0, t = base_time;
  bool ok = b.append(g_trace.segments.process.data, g_trace.segments.process.size);
  for (size_t i = 0; i < g_trace.segments.nmodules && ok; ++i) {
    const Module& m = g_trace.segments.modules[i];
    uint8_t head[1 + 2 * wire::kMaxVarint];
    uint8_t dt[wire::kMaxVarint];
    const size_t dn = static_cast<size_t>(wire::put_varint(dt, m.time - t) - dt);
    head[0] = fmt::tag_of(fmt::RecordType::ModuleLoad);
    const size_t hn = static_cast<size_t>(wire::put_varint(head + 1, dn + m.rest.size) - head);
    ok = b.append(head, hn) && b.append(dt, dn) && b.append(m.rest.data, m.rest.size);
    t = m.time;
  }
  if (ok && b.size) writer_write_block(0, base_time, 0, b.data, b.size, kFlags);
  b.release();
  // The stack definitions, in blocks of about kPrologueBlock bytes cut between records.
  for (size_t at = 0; at < g_trace.segments.stacks.size;) {
    size_t end = at;
    while (end < g_trace.segments.stacks.size && end - at < kPrologueBlock) {
      wire::Cursor c(g_trace.segments.stacks.data + end + 1, g_trace.segments.stacks.data + g_trace.segments.stacks.size);
      const uint8_t* data;
      size_t n;
      if (!c.get_bytes(data, n)) break;
      end = static_cast<size_t>(data + n - g_trace.segments.stacks.data);
    }
    if (end == at) break;
    writer_write_block(0, 0, 0, g_trace.segments.stacks.data + at, end - at, kFlags | fmt::kBlockFlagStacks);
    at = end;
  }
}

}  // namespace memtide::rec
