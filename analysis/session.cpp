// The session driver: a resumable replay of one trace (analysis/replay.h). Each advance() reads
// the blocks appended since the last one on a reader thread that decodes and merges them
// (batches.h) and replays the merged batches here (replay.cpp); snapshot() finishes a copy of
// the model. analyze_file is a session advanced once and finished.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "analysis/batches.h"
#include "analysis/replay.h"
#include "analysis/replayer.h"
#include "formats/checkpoint.h"
#include "formats/decoder.h"
#include "formats/merge.h"
#include "formats/reader.h"

namespace memtide::analysis {

using namespace memtide::fmt;
using detail::BlockSource;
using detail::ReadItem;

// The session's state: the reader's position, the merger's queues and the replay, kept
// between calls. Not movable (the Replayer refers to the model and the options): held by
// pointer.
struct Session::Impl {
  ReplayOptions opt;
  FileReader reader;
  bool is_file = false;
  std::string path;
  Model m;  // being built: finished into copies by snapshot()
  detail::ReplayerPtr rp = detail::make_replayer(m, opt);
  EventMerger merger;
  std::unique_ptr<DecodeScratch> scratch = std::make_unique<DecodeScratch>();  // for the records the replay decodes
  uint64_t blocks = 0;
  ReadResult tail;  // Truncated: where the file ends inside a block (for finish())
  bool open = false, stopped = false, finished = false, broken = false;
  uint64_t from_checkpoint = 0;  // the checkpoint the replay started from (its seq), 0: the start
  uint64_t clipped = 0;          // a window on a kept trace begun before its range: the range's start
  bool at_stop = false;          // a window's replay reached its stop: nothing after it is read
  uint64_t tail_time = 0;        // (at_stop) the time of the trace's last record, read from its tail
  uint64_t began = 0;            // the offset the replay's reading began at
  uint64_t stop_after = UINT64_MAX;  // a window's stop (absolute; at or after the replay's): no reading past it
  uint64_t progress_end = 0;         // (a window) about where its reading ends; 0: the file's end
  std::optional<std::vector<CheckpointHead>> heads;  // found once, when needed

  explicit Impl(ReplayOptions o) : opt(std::move(o)) {}

  // The bytes on disk: a set's offsets go on from its removed segments.
  uint64_t kept_size() const {
    const fmt::SegmentFiles* set = reader.segment_set();
    const uint64_t size = reader.size();
    return set && !set->segments().empty() ? size - std::min(size, set->segments().front().base) : size;
  }

  void opened() {
    open = true;
    merger.set_exact_watermarks((reader.info().flags & kFileFlagExactWatermarks) != 0);
    m.file_size = kept_size();
    for (const std::string& w : reader.warnings()) m.warnings.push_back(w);
    start_from_checkpoint();
    began = reader.offset();
    // (The replay's time base is the recording's start or the first record, whichever is
    // earlier: its stop is never after this one.)
    if (opt.to) {
      const uint64_t base = start_time(), end = std::max(*opt.to, opt.at.value_or(0));
      if (base) stop_after = base + std::min(end, UINT64_MAX - base);
      // The progress is of the part to read: up to the first checkpoint after the stop.
      for (const CheckpointHead& h : checkpoints())
        if (h.time > stop_after) {
          progress_end = h.offset;
          break;
        }
    }
  }

  // A window (--from) starts from the latest checkpoint at or before it (and before --at): its
  // live blocks, then the process stream and the stack definitions of the blocks before the
  // first that may hold a record timed after it, then every block from there, its events timed
  // before the checkpoint skipped. MEMTIDE_FULL_REPLAY=1 replays from the start instead.
  void start_from_checkpoint() {
    const char* full = std::getenv("MEMTIDE_FULL_REPLAY");
    // (A segment set whose first segments are gone starts at its first checkpoint, window or not.)
    const bool cut = reader.starts_mid_run();
    if ((!opt.from && !cut) || (full && *full && std::string(full) != "0")) return;
    const std::vector<CheckpointHead>& heads = checkpoints();
    const uint64_t base = start_time();
    if (cut && heads.empty()) m.warnings.push_back("no checkpoint in the first kept segment: the blocks allocated before it are unknown");
    if (heads.empty() || base == 0) return;
    uint64_t t = opt.from ? base + std::min<uint64_t>(*opt.from, UINT64_MAX - base) : 0;
    if (opt.at) t = std::min(t, base + std::min<uint64_t>(*opt.at, UINT64_MAX - base));
    const CheckpointHead* h = checkpoint_before(heads, t);
    if (!h && cut) h = &heads.front();
    if (!h) return;
    bool kept = false;
    if (cut && (!opt.from || *opt.from < h->time - base)) {
      // The set's range is a window from that checkpoint: the allocations before it are not in
      // it. Without a window asked for, the blocks it holds that are never freed are leaks all
      // the same (a window's leaks stay those allocated in it).
      const bool whole = !opt.from && !opt.to;
      opt.from = h->time - base;
      rp = detail::make_replayer(m, opt);
      if (whole) detail::count_before_range(*rp), kept = true;
      else clipped = h->time;
    }
    std::vector<std::pair<CheckpointDomain, CheckpointEntry>> live;
    // (A head's counts are only what it says: a damaged one is found out by the read, which it
    // must reach, not by a reservation of exabytes.)
    uint64_t said = 0;
    for (uint64_t n : h->blocks) said = n > (uint64_t{1} << 24) - said ? uint64_t{1} << 24 : said + n;
    live.reserve(said);
    if (std::string e = read_checkpoint(reader, *h, [&](CheckpointDomain d, const CheckpointEntry& x) { live.emplace_back(d, x); });
        !e.empty()) {
      m.warnings.push_back(e + ": replayed from the start");
      return;
    }
    for (const auto& [d, x] : live) detail::seed(*rp, d, x);
    for (const CheckpointHead& k : heads) {
      if (k.seq > h->seq) break;
      for (const CheckpointHead::MarkerCopy& mk : k.markers) detail::seed_marker(*rp, mk);
    }
    detail::seed_done(*rp, *h);
    from_checkpoint = h->seq;
    if (kept) m.kept_from = h->time;
    // The blocks before replay_from: stream 0 (process, modules, counters, markers) and the
    // stack definitions; the others are stepped over by their headers.
    while (reader.offset() < h->replay_from) {
      BlockRef ref;
      if (!reader.peek_header(ref).ok()) break;
      const uint16_t f = ref.header.flags;
      const bool wanted = (ref.header.stream == 0 && !(f & (kBlockFlagCheckpoint | kBlockFlagCheckpointData))) ||
                          (f & kBlockFlagStacks);
      Block b;
      const ReadResult r = wanted ? reader.next(b) : reader.skip(ref);
      if (!r.ok()) break;
      if (wanted) {
        if (ReadResult d = detail::replay_block(*rp, b, *scratch); !d.ok()) m.warnings.push_back(detail::block_warning(d));
      }
    }
    reader.seek(h->replay_from);
  }

  const std::vector<CheckpointHead>& checkpoints() {
    if (!heads) heads = find_checkpoints(reader, &m.warnings);
    return *heads;
  }

  // A window stopped at its end: what the rest of the file says that is not about its time —
  // the End record, the time of the last record and the names `memtide symbolize` appended
  // after it — from the blocks after the last checkpoint (End comes after it), or without
  // checkpoints the last MiB first; the process stream's and the names' blocks are decoded,
  // the others stepped over by their headers.
  void read_tail() {
    struct Tail : NullVisitor {
      Model names;  // (the Symbols records, into `m` once End was found before them)
      std::optional<End> end;
      uint64_t time = 0;
      void on_counters(uint32_t, const Counters& x) { time = std::max(time, x.time); }
      void on_end(uint32_t, const End& x) {
        time = std::max(time, x.time);
        end = x;
      }
      void on_symbols(uint32_t, const Symbols& x) { add_embedded(names, x); }
    };
    auto scan = [&](uint64_t from, bool sync) {
      Tail v;
      reader.seek(from);
      if (sync && !reader.resync()) return v;
      for (;;) {
        BlockRef ref;
        if (!reader.peek_header(ref).ok()) break;
        const uint16_t f = ref.header.flags;
        const bool wanted = (ref.header.stream == 0 && !(f & (kBlockFlagCheckpoint | kBlockFlagCheckpointData))) ||
                            (f & kBlockFlagSymbols);
        Block b;
        if (!(wanted ? reader.next(b) : reader.skip(ref)).ok()) break;
        if (wanted) (void)decode_block(b, *scratch, v);
      }
      return v;
    };
    constexpr uint64_t kTail = uint64_t{1} << 20;
    const std::vector<CheckpointHead>& hs = checkpoints();
    const uint64_t size = reader.size();
    Tail v;
    if (!hs.empty()) {
      v = scan(hs.back().replay_from, false);
    } else {
      const bool last_mib = size > began + kTail;
      v = scan(last_mib ? size - kTail : began, last_mib);
      if (!v.end && last_mib) v = scan(began, false);
    }
    tail_time = v.time;
    if (v.end) m.complete = true, m.end = v.end;
    for (auto& [id, names] : v.names.embedded) {
      std::vector<EmbeddedSymbol>& to = m.embedded[id];
      to.insert(to.end(), names.begin(), names.end());
    }
  }

  // The recording's start (ProcessInfo, the first record of the file), 0 when not found.
  uint64_t start_time() {
    struct First : NullVisitor {
      uint64_t start = 0;
      void on_process_info(uint32_t, const ProcessInfo& x) { start = x.monotonic_start_ns; }
    } v;
    const uint64_t at = reader.offset();
    // (Stream 0's first block: the blocks of a thread's stack definitions may come before it.)
    for (int i = 0; i < 64 && !v.start; ++i) {
      Block b;
      if (!reader.next(b).ok()) break;
      if (b.header.stream == 0) decode_block(b, *scratch, v);
    }
    reader.seek(at);
    return v.start;
  }

  Session::Progress advance() {
    Session::Progress pr;
    if (!open || stopped || broken) return pr;
    const uint64_t size = reader.size();
    m.file_size = std::max(m.file_size, kept_size());
    const uint64_t start = reader.offset();
    tail = {};
    // The reader thread stops after the last complete block; every item it read is taken
    // below, so the reader's offset is where the next call starts. It merges the blocks with
    // `merger` meanwhile: the merger is this thread's again once `source` is gone.
    BlockSource source(reader, merger, stop_after);
    try {
      for (;;) {
        ReadItem it = source.next();
        detail::replay_batch(*rp, *it.batch, *scratch);
        source.give(std::move(it.batch));
        if (!it.warnings.empty()) {
          m.corrupt = true;
          for (std::string& w : it.warnings) m.warnings.push_back(std::move(w));
        }
        pr.blocks += it.blocks;
        // (A file still being written grows while it is read: the size is then the offset reached,
        // so that the fraction never passes 1.)
        if (opt.progress && it.blocks && ((blocks + it.blocks) >> 6) != (blocks >> 6))
          opt.progress(it.offset, std::max(progress_end ? std::min(progress_end, size) : size, it.offset));
        blocks += it.blocks;
        if (detail::passed(*rp)) {  // the window's stop: the rest of the file does not change it
          at_stop = stopped = true;
          break;
        }
        const ReadResult& r = it.read;
        if (r.ok()) continue;
        if (r.end_of_file()) break;
        if (r.status == ReadStatus::Truncated) {
          tail = r;
          pr.waiting = true;
          break;
        }
        m.corrupt = true;
        m.warnings.push_back(r.message);
        if (it.last) {
          stopped = true;  // no valid block after it
          break;
        }
      }
    } catch (...) {
      broken = true;
      throw;
    }
    pr.bytes = reader.offset() - start;
    return pr;
  }

  void finish() {
    if (finished || !open || broken) return;
    finished = stopped = true;
    if (at_stop) {  // (the merger may have stopped in the middle of its work: nothing more of it)
      read_tail();
      return;
    }
    if (tail.status == ReadStatus::Truncated) {
      const bool growing = is_file && is_being_written(path);
      m.truncated = true;
      m.warnings.push_back(growing ? "the trace is still being written: analysed up to offset " +
                                         std::to_string(tail.offset)
                                   : tail.message + ": analysed up to the cut");
    }
    detail::replay_rest(*rp, merger);
    for (const ReadResult& e : merger.take_errors()) {
      m.corrupt = true;
      m.warnings.push_back(detail::block_warning(e));
    }
    if (detail::passed(*rp)) read_tail();  // the window's stop was among the events held back
  }

  std::unique_ptr<Model> snapshot() const {
    auto out = std::make_unique<Model>(m);
    if (merger.stats().out_of_order)
      out->warnings.push_back(std::to_string(merger.stats().out_of_order) + " events were merged out of time order");
    detail::finish_into(*rp, *out);
    out->last_time = std::max(out->last_time, tail_time);
    // A set whose first segments are gone: what its figures cover.
    auto since = [&](uint64_t t) {
      char b[32];
      std::snprintf(b, sizeof b, "%.3f s", static_cast<double>(t > out->time_base ? t - out->time_base : 0) / 1e9);
      return std::string(b);
    };
    if (out->kept_from) {
      const Totals& h = out->heap();
      out->warnings.push_back("the kept segments begin at " + since(out->kept_from) +
                              ": allocations, frees and peak are from then on; the leaks include " +
                              std::to_string(h.before_range_blocks) + " heap blocks (" + std::to_string(h.before_range_bytes) +
                              " bytes) allocated before it");
    } else if (clipped) {
      out->window_clipped_from = clipped;
      out->warnings.push_back("the kept segments begin at " + since(clipped) + ": the window is counted from then on");
    }
    // Every record the End counts is in the file (docs/FORMAT.md): fewer read means some are not.
    // (A recording stopped by its size limit or an error counts what it recorded, not all of it written.)
    const bool capped = out->end && ((out->end->reason == EndReason::Detached && !out->process.attached) ||
                                     out->end->reason == EndReason::Error);
    // (A set cut with no checkpoint to start from has lost the counts before it: said above.)
    const bool unseeded = reader.starts_mid_run() && !from_checkpoint;
    if (out->complete && out->end && !at_stop && !capped && !unseeded) {
      uint64_t allocs = 0, frees = 0;
      for (const ThreadInfo& t : out->threads) allocs += t.allocations, frees += t.frees;
      if (allocs < out->end->allocations || frees < out->end->frees)
        out->warnings.push_back("the End record counts " + std::to_string(out->end->allocations) + " allocations and " +
                                std::to_string(out->end->frees) + " frees, the trace holds " + std::to_string(allocs) +
                                " and " + std::to_string(frees) +
                                ": events are missing (a block removed from the file, or written after its end)");
    }
    if (!out->complete && !out->truncated)
      out->warnings.insert(out->warnings.begin(), "no end record: the process was killed or is still running; "
                                                  "analysed what was written");
    return out;
  }
};

Session::Session(ReplayOptions options) : p_(std::make_unique<Impl>(std::move(options))) {}
Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

std::string Session::open(const std::string& path) {
  if (OpenResult o = p_->reader.open(path); !o.ok()) return o.message.empty() ? "cannot open the file" : o.message;
  p_->is_file = true;
  p_->path = path;
  p_->opened();
  return {};
}

std::string Session::open_memory(std::span<const uint8_t> data) {
  if (OpenResult o = p_->reader.open_memory(data); !o.ok()) return o.message.empty() ? "not a trace" : o.message;
  p_->opened();
  return {};
}

Session::Progress Session::advance() { return p_->advance(); }
void Session::finish() { p_->finish(); }
bool Session::finished() const { return p_->finished; }
bool Session::broken() const { return p_->broken; }
std::unique_ptr<Model> Session::snapshot() const { return p_->snapshot(); }
uint64_t Session::checkpoint() const { return p_->from_checkpoint; }
uint64_t Session::offset() const { return p_->reader.offset(); }
bool Session::fell_behind() const { return p_->reader.fell_behind(); }
uint64_t Session::bytes_read() const { return p_->reader.bytes_read(); }

namespace {

// The whole trace: one advance to its end, then finish.
AnalyzeResult run(Session& s, const ReplayOptions& opt) {
  s.advance();
  s.finish();
  AnalyzeResult res;
  res.model = s.snapshot();
  if (opt.progress) opt.progress(res.model->file_size, res.model->file_size);
  return res;
}

}  // namespace

AnalyzeResult analyze_file(const std::string& path, const ReplayOptions& options) {
  Session s(options);
  if (std::string e = s.open(path); !e.empty()) return {e, nullptr};
  return run(s, options);
}

AnalyzeResult analyze_memory(std::span<const uint8_t> data, const ReplayOptions& options) {
  Session s(options);
  if (std::string e = s.open_memory(data); !e.empty()) return {e, nullptr};
  return run(s, options);
}

}  // namespace memtide::analysis
