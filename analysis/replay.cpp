// The replay: a visitor whose handlers inline into the loop that plays the merged events. A
// reader thread decodes and merges the blocks while this one replays (batches.h).
//
// Sections:
//   [1] Per-domain working state (live sets, per-stack counters, lazy peak snapshot)
//   [2] Replayer: record handlers
//   [3] Heap-like domains (heap, custom): alloc / free
//   [4] Mmap domain: ranges, partial munmap, mremap (replay_mmap.cpp, with the seeding from a
//       checkpoint)
//   [5] Finishing: leaks, peaks, model (into a copy: the replay can go on)
//   [6] Playing the reader thread's batches (the interface of replayer.h; the Session that
//       drives it is session.cpp)
//
// Peak by stack without a second pass: each stack remembers the sequence number of its last
// change. When a stack is about to change and its last change is not after the latest peak,
// its current value is the value it had at that peak, so it is saved first. At the end, stacks
// untouched since the latest peak take their current value. O(1) per event.
#include "analysis/replay.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <utility>

#include "analysis/batches.h"
#include "analysis/live_map.h"
#include "analysis/reach.h"
#include "analysis/replay_state.h"
#include "analysis/replay_class.h"
#include "analysis/replayer.h"
#include "formats/checkpoint.h"
#include "formats/decoder.h"
#include "formats/live_rules.h"
#include "formats/merge.h"
#include "formats/reader.h"
#include "formats/sampling.h"

namespace memtide::analysis::detail {

using namespace memtide::fmt;

// ---------------------------------------------------------------------------------------
// [1] Working state: replay_state.h
// [2] Replayer: replay_class.h
// ---------------------------------------------------------------------------------------


// ---------------------------------------------------------------------------------------
// [3] Heap-like domains
// ---------------------------------------------------------------------------------------

template <Domain D, bool W>
[[gnu::always_inline]] inline void Replayer::heap_alloc(uint32_t stream, const Alloc& a, uint64_t bytes) {
  constexpr Domain d = D;
  DomainState& ds = dom_[static_cast<unsigned>(d)];
  LiveMap<LiveBlock>& live = live_[d == Domain::Heap ? 0 : 1];
  auto [blk, fresh] = live.insert(a.addr);
  if (!fresh) [[unlikely]] {
    if (!W || a.time >= m_.window_from) ++m_.anomalies.double_allocs;  // (a window's: from its start)
    const LiveBlock old = *blk;
    release<D, W>(a.addr, old, a.time);
  }
  const bool c = !W || counted(a.time);
  const uint32_t s = c ? ds.index(a.stack) : kNoStack;
  Weighted wt{bytes, 1};
  LiveBlock nb;
  if (a.weight) [[unlikely]] {
    wt = {live::sample_weight(a.weight, bytes), sampled_blocks(a.weight, bytes, a.addr, a.time)};
    nb.sampled = 1;
    weights_[d == Domain::Heap ? 0 : 1][a.addr] = wt.bytes;
    m_.sampling.add_sample(wt.bytes, bytes);
  }
  nb.bytes = bytes;
  nb.api_ = static_cast<uint8_t>(a.api);
  nb.counted = c;
  nb.time = a.time;
  nb.stack = s;
  nb.thread = stream;
  *blk = nb;  // the whole block at once (the slot of a fresh insert holds no value yet)
  if (d == Domain::Heap) {
    heap_all_live_ += wt.bytes;
    m_.heap_series.add(a.time, heap_all_live_);
  } else {
    custom_all_live_ += wt.bytes;
    m_.custom_series.add(a.time, custom_all_live_);
  }
  if (ThreadWork* tw = thread_work(stream)) {
    if (d == Domain::Heap) tw->last_alloc = a.addr;
    ++tw->allocs;
  }
  if (!c) return;
  ds.t.allocations += wt.blocks;
  ds.t.allocated_bytes += wt.bytes;
  ApiCount& ac = m_.alloc_api[static_cast<unsigned>(a.api)];
  ac.calls += wt.blocks;
  ac.bytes += wt.bytes;
  if (s != kNoStack) {
    StackMetrics& sm = ds.w(s).m;
    sm.alloc_count += wt.blocks;
    sm.alloc_bytes += wt.bytes;
    if (nb.sampled) [[unlikely]]
      sm.note_alloc_sample(wt.bytes, bytes);
  }
  ds.change(s, static_cast<int64_t>(wt.bytes), static_cast<int64_t>(wt.blocks), a.time);
}

template <Domain D, bool W>
[[gnu::always_inline]] inline void Replayer::release(uint64_t addr, const LiveBlock& b, uint64_t time) {
  constexpr Domain d = D;
  const Weighted wt = weighted(d == Domain::Heap ? 0 : 1, addr, b, /*forget=*/true);
  MEMTIDE_CHECK((d == Domain::Heap ? heap_all_live_ : custom_all_live_) >= wt.bytes);
  if (d == Domain::Heap) {
    heap_all_live_ -= wt.bytes;
    m_.heap_series.add(time, heap_all_live_);
  } else {
    custom_all_live_ -= wt.bytes;
    m_.custom_series.add(time, custom_all_live_);
  }
  if (!W || b.counted)
    dom_[static_cast<unsigned>(d)].change(b.stack, -static_cast<int64_t>(wt.bytes), -static_cast<int64_t>(wt.blocks), time);
}

Weighted Replayer::weighted_slow(unsigned map, uint64_t addr, const LiveBlock& b, bool forget) {
  auto& weights = weights_[map];
  const auto it = weights.find(addr);
  if (it == weights.end()) return {b.bytes, 1};
  const Weighted wt{it->second, sampled_blocks(it->second, b.bytes, addr, b.time)};
  if (forget) weights.erase(it);
  return wt;
}

// A switch from exact to sampled recording: the recorder records the free of a block of the
// exact period only when its address is kept (formats/sampling.h), so the blocks live now are
// sampled the same way. A kept block stands for kExactKeepFactor blocks from here on; the
// others leave the estimate (not as frees: their fate is not recorded).
void Replayer::convert_exact_blocks(uint64_t time) {
  for (unsigned map = 0; map < 2; ++map) {
    const Domain d = map == 0 ? Domain::Heap : Domain::Custom;
    DomainState& ds = dom_[static_cast<unsigned>(d)];
    std::vector<uint64_t> dropped, kept;
    uint64_t& all_live = map == 0 ? heap_all_live_ : custom_all_live_;
    live_[map].for_each([&](uint64_t addr, const LiveBlock& b) {
      if (!b.sampled) (live::stays_at_switch(addr) ? kept : dropped).push_back(addr);
    });
    // The dropped ones first: the estimate never passes through a sum larger than both the
    // exact figure before and the estimate after (a false peak).
    for (uint64_t addr : dropped) {
      LiveBlock b;
      live_[map].erase(addr, b);
      all_live -= b.bytes;
      if (b.counted) ds.change(b.stack, -static_cast<int64_t>(b.bytes), -1, time);
    }
    for (uint64_t addr : kept) {
      LiveBlock* b = live_[map].find(addr);
      const uint64_t weight = live::weight_after_switch(b->bytes), extra = weight - b->bytes;
      weights_[map][addr] = weight;
      b->sampled = 1;
      all_live += extra;
      if (b->counted) ds.change(b->stack, static_cast<int64_t>(extra), static_cast<int64_t>(kExactKeepFactor - 1), time);
    }
  }
  m_.heap_series.add(time, heap_all_live_);
  m_.custom_series.add(time, custom_all_live_);
}

template <Domain D, bool W>
[[gnu::always_inline]] inline void Replayer::heap_free(uint32_t stream, const Free& f) {
  constexpr Domain d = D;
  DomainState& ds = dom_[static_cast<unsigned>(d)];
  LiveMap<LiveBlock>& live = live_[d == Domain::Heap ? 0 : 1];
  ThreadWork* tw = thread_work(stream);
  if (tw) ++tw->frees;
  LiveBlock b;
  if (!live.erase(f.addr, b)) [[unlikely]] {
    unknown_free(d, stream, f);
    return;
  }
  const Weighted wt = weighted(d == Domain::Heap ? 0 : 1, f.addr, b, /*forget=*/false);
  const ApiCount before = m_.free_api[static_cast<unsigned>(f.api)];
  if (!W || b.counted) {
    ds.t.frees += wt.blocks;
    ds.t.freed_bytes += wt.bytes;
    m_.free_api[static_cast<unsigned>(f.api)] = {before.calls + wt.blocks, before.bytes + wt.bytes};
  }
  if (family_of(b.api()) != family_of(f.api)) [[unlikely]] {
    ++m_.anomalies.mismatch_count;
    const uint64_t raw = b.stack != kNoStack ? ds.raw[b.stack] : 0;
    auto [it, fresh] = mismatch_index_.try_emplace({raw, static_cast<uint8_t>(b.api()), static_cast<uint8_t>(f.api)},
                                                   m_.anomalies.mismatches.size());
    if (fresh) m_.anomalies.mismatches.push_back({StackId(raw), b.api(), f.api, 0, 0, f.time});
    Mismatch& mm = m_.anomalies.mismatches[it->second];
    mm.count += wt.blocks;
    mm.bytes += wt.bytes;
  }
  if (d == Domain::Heap) {
    // (Not for a sampled block: the allocations between its own and its free were not all
    // recorded, so whether it was temporary is not known.)
    if (tw && tw->last_alloc == f.addr && b.thread == stream && !b.sampled) {
      tw->last_alloc = 0;
      if (!W || b.counted) {
        ds.t.temporaries += wt.blocks;
        ds.t.temporary_bytes += wt.bytes;
        if (b.stack != kNoStack) {
          ds.w(b.stack).m.temp_count += wt.blocks;
          ds.w(b.stack).m.temp_bytes += wt.bytes;
        }
      }
    }
  }
  release<D, W>(f.addr, b, f.time);
}

void Replayer::unknown_free(Domain d, uint32_t stream, const Free& f) {
  // A sampled trace records the frees of sampled blocks, and after a switch from exact
  // recording those of kept addresses, which may have been freed and reused unsampled since.
  if (m_.sampling.sampled() && d != Domain::Mmap) return;
  if (m_.has_window() && f.time < m_.window_from) return;  // a window's anomalies are from its start on
  const unsigned di = static_cast<unsigned>(d);
  if (m_.process.attached) return void(++m_.freed_before_recording[di]);  // made before it: attached.h
  ++m_.anomalies.unknown_free_count[di];
  if (!m_.has_window()) {
    ++dom_[di].t.frees;
    ++m_.free_api[static_cast<unsigned>(f.api)].calls;
  }
  auto [it, fresh] = unknown_index_.try_emplace({static_cast<uint8_t>(f.api), stream, static_cast<uint8_t>(di)},
                                                m_.anomalies.unknown_frees.size());
  if (fresh) m_.anomalies.unknown_frees.push_back({f.api, ThreadId(stream), 0, f.addr, f.time});
  ++m_.anomalies.unknown_frees[it->second].count;
}

// ---------------------------------------------------------------------------------------
// [5] Finishing
// ---------------------------------------------------------------------------------------

// A window whose `at` is later than its end: the replay goes on to `at` for the figures live
// then, while the window's own (made in it, not freed by its end) are kept as they stood.
void Replayer::freeze() {
  frozen_ = std::make_unique<Model>(m_);
  finish_own(*frozen_);
}

void Replayer::finish_into(Model& out) const {
  finish_own(out);
  if (!frozen_) return;
  const Model& f = *frozen_;
  // (No stack is added to a domain's work after the window's end: its allocations are not
  // counted, so the stacks are in the same order.)
  for (unsigned di = 0; di < kDomainCount; ++di) {
    Totals t = f.totals[di];
    t.at_bytes = out.totals[di].at_bytes;
    t.at_blocks = out.totals[di].at_blocks;
    out.totals[di] = t;
    std::vector<StackStats>& st = out.stacks[di];
    const std::vector<StackStats>& fs = f.stacks[di];
    MEMTIDE_CHECK(st.size() == fs.size());
    for (std::size_t i = 0; i < st.size() && i < fs.size(); ++i) {
      StackMetrics m = fs[i].m;
      m.at_bytes = st[i].m.at_bytes;
      m.at_blocks = st[i].m.at_blocks;
      st[i].m = m;
    }
  }
  out.alloc_api = f.alloc_api;
  out.free_api = f.free_api;
  out.anomalies = f.anomalies;
  out.freed_before_recording = f.freed_before_recording;
  out.stack_history = f.stack_history;
}

void Replayer::finish_own(Model& out) const {
  if (!based_) apply_base(out, out.have_process ? out.process.monotonic_start_ns : 0);
  const bool at_now = opt_.at && !at_done_;  // the chosen time is after the last event
  auto leak = [](StackMetrics& m, uint64_t bytes, uint64_t time, uint64_t blocks = 1) {
    if (m.leaked_blocks == 0 || time < m.first_leak_time) m.first_leak_time = time;
    if (time > m.last_leak_time) m.last_leak_time = time;
    m.leaked_blocks += blocks;
    m.leaked_bytes += bytes;
  };
  // Per domain, the statistics of each stack as they stand (work index order).
  std::array<std::vector<StackMetrics>, kDomainCount> ms;
  for (unsigned di = 0; di < kDomainCount; ++di) {
    const DomainState& ds = dom_[di];
    ms[di].reserve(ds.work.size());
    for (const StackWork& w : ds.work) {
      StackMetrics m = w.m;
      if (w.last_change <= ds.peak_seq) {  // untouched since the latest peak
        m.peak_bytes = w.cur_bytes;
        m.peak_blocks = w.cur_blocks;
      }
      if (at_now) {
        m.at_bytes = w.cur_bytes;
        m.at_blocks = w.cur_blocks;
      }
      ms[di].push_back(m);
    }
  }
  // A kept trace (before_range_): the blocks made before its range that are still live, which
  // only its seeding left uncounted, are leaks of their stacks as well, at the time the
  // checkpoint gives them.
  std::array<Weighted, kDomainCount> before{Weighted{0, 0}, Weighted{0, 0}, Weighted{0, 0}};
  auto before_range = [&](unsigned di, uint64_t addr, const LiveBlock& b) {
    const unsigned map = di == 0 ? 0 : 1;
    const Weighted wt = const_cast<Replayer*>(this)->weighted(map, addr, b, false);
    before[di].bytes += wt.bytes;
    before[di].blocks += wt.blocks;
    if (b.stack == kNoStack) return;
    StackMetrics& sm = ms[di][b.stack];
    leak(sm, wt.bytes, b.time, wt.blocks);
    sm.before_range_bytes += wt.bytes;
    sm.before_range_blocks += wt.blocks;
    if (b.sampled) sm.note_leak_sample(wt.bytes, b.bytes);
  };
  for (int i = 0; i < 2; ++i) {
    const unsigned di = i == 0 ? 0 : static_cast<unsigned>(Domain::Custom);
    std::vector<StackMetrics>& v = ms[di];
#ifdef MEMTIDE_CHECKS  // the live map agrees with the running counts (each event changed both)
    uint64_t all = 0, counted_bytes = 0, counted_blocks = 0;
    live_[i].for_each([&](uint64_t addr, const LiveBlock& b) {
      const Weighted wt = const_cast<Replayer*>(this)->weighted(static_cast<unsigned>(i), addr, b, false);
      all += wt.bytes, counted_bytes += b.counted ? wt.bytes : 0, counted_blocks += b.counted ? wt.blocks : 0;
    });
    MEMTIDE_CHECK(all == (i == 0 ? heap_all_live_ : custom_all_live_));
    MEMTIDE_CHECK(counted_bytes == dom_[di].live_bytes && counted_blocks == dom_[di].live_blocks);
#endif
    live_[i].for_each([&](uint64_t addr, const LiveBlock& b) {
      if (!b.counted) [[unlikely]] {
        if (before_range_) before_range(di, addr, b);
        return;
      }
      if (b.stack == kNoStack) return;
      if (!b.sampled) [[likely]] {
        leak(v[b.stack], b.bytes, b.time);
        return;
      }
      const Weighted wt = const_cast<Replayer*>(this)->weighted(static_cast<unsigned>(i), addr, b, false);
      leak(v[b.stack], wt.bytes, b.time, wt.blocks);
      v[b.stack].note_leak_sample(wt.bytes, b.bytes);
    });
  }
  // With a complete leak scan: which of the heap's leaked blocks are still reachable, and
  // which are indirect leaks.
  uint64_t reach_bytes[3] = {}, reach_blocks[3] = {};
  if (scan_.complete()) {
    std::vector<std::pair<uint64_t, const LiveBlock*>> live;
    live.reserve(live_[0].size());
    live_[0].for_each([&](uint64_t addr, const LiveBlock& b) { live.emplace_back(addr, &b); });
    std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<ScanData::Block> blocks;
    blocks.reserve(live.size());
    for (const auto& [addr, b] : live) blocks.push_back({addr, b->bytes});
    std::vector<std::pair<uint64_t, uint64_t>> own_mappings;
    own_mappings.reserve(ranges_.size());
    for (const auto& [start, r] : ranges_) own_mappings.emplace_back(start, r.end);
    const std::vector<Reach> cls = scan_.classify(blocks, own_mappings);
    for (std::size_t i = 0; i < live.size(); ++i) {
      const LiveBlock& b = *live[i].second;
      if ((!b.counted && !before_range_) || cls[i] == Reach::Definite) continue;
      const Weighted wt = const_cast<Replayer*>(this)->weighted(0, live[i].first, b, false);
      const auto k = static_cast<unsigned>(cls[i]);
      reach_bytes[k] += wt.bytes;
      reach_blocks[k] += wt.blocks;
      if (b.stack == kNoStack) continue;
      StackMetrics& m = ms[0][b.stack];
      if (cls[i] == Reach::Reachable) {
        m.reachable_blocks += wt.blocks;
        m.reachable_bytes += wt.bytes;
      } else {
        m.indirect_blocks += wt.blocks;
        m.indirect_bytes += wt.bytes;
      }
    }
  }
  out.leak_scan = {scan_.present(), scan_.complete(), scan_.regions(), scan_.words(), scan_.refs(), scan_.duration_ns(),
                   scan_.program_suppressions()};
  if (scan_.present() && !scan_.complete())
    out.warnings.push_back("the leak scan at exit did not complete: every block not freed counts as leaked");
  std::vector<StackMetrics>& mv = ms[static_cast<unsigned>(Domain::Mmap)];
  for (const auto& [id, mp] : mappings_) {
    if (!mp.counted && before_range_) {
      Weighted& x = before[static_cast<unsigned>(Domain::Mmap)];
      x.bytes += mp.live, ++x.blocks;
      if (mp.stack == kNoStack) continue;
      leak(mv[mp.stack], mp.live, mp.time);
      mv[mp.stack].before_range_bytes += mp.live;
      ++mv[mp.stack].before_range_blocks;
    } else if (mp.counted && mp.stack != kNoStack) {
      leak(mv[mp.stack], mp.live, mp.time);
    }
  }

  for (unsigned di = 0; di < kDomainCount; ++di) {
    const DomainState& ds = dom_[di];
    Totals t = ds.t;
    t.leaked_bytes = ds.live_bytes + before[di].bytes;
    t.leaked_blocks = ds.live_blocks + before[di].blocks;
    t.before_range_bytes = before[di].bytes;
    t.before_range_blocks = before[di].blocks;
    if (di == static_cast<unsigned>(Domain::Heap)) {
      t.reachable_bytes = reach_bytes[static_cast<unsigned>(Reach::Reachable)];
      t.reachable_blocks = reach_blocks[static_cast<unsigned>(Reach::Reachable)];
      t.indirect_bytes = reach_bytes[static_cast<unsigned>(Reach::Indirect)];
      t.indirect_blocks = reach_blocks[static_cast<unsigned>(Reach::Indirect)];
    }
    if (at_now) {
      t.at_bytes = ds.live_bytes;
      t.at_blocks = ds.live_blocks;
    }
    out.totals[di] = t;
    std::vector<StackStats>& st = out.stacks[di];
    st.clear();
    st.reserve(ds.work.size());
    for (std::size_t i = 0; i < ds.work.size(); ++i) {
      st.push_back({StackId(ds.raw[i]), ms[di][i]});
      if (!out.stack_table.defined(StackId(ds.raw[i]))) ++out.anomalies.undefined_stacks;
    }
  }
  for (ThreadInfo& t : out.threads) {
    const uint32_t id = t.id.value;
    if (id < threads_.size()) {
      t.allocations = threads_[id].allocs;
      t.frees = threads_[id].frees;
    }
  }
  for (uint32_t id = 0; id < threads_.size(); ++id)
    if (threads_[id].allocs && !thread_index_.count(id)) {
      ThreadInfo t;
      t.id = ThreadId(id);
      t.allocations = threads_[id].allocs;
      t.frees = threads_[id].frees;
      out.threads.push_back(std::move(t));
    }
  // (A replay from a checkpoint has the threads' markers before it first.)
  std::stable_sort(out.markers.begin(), out.markers.end(), [](const auto& a, const auto& b) { return a.time < b.time; });
  std::sort(out.threads.begin(), out.threads.end(),
            [](const ThreadInfo& a, const ThreadInfo& b) { return a.id < b.id; });
  sort_embedded(out);
  if (dom_[0].history) out.stack_history = dom_[0].history->finish(out.last_time, dom_[0]);
  if (out.end && out.end->reason == EndReason::Detached)
    out.warnings.push_back("the recording stopped before the program ended (the trace reached its size limit, "
                           "MEMTIDE_MAX_SIZE): blocks not freed by then count as not freed");
  if (out.end && out.end->lost_events)
    out.warnings.push_back("the recorder lost " + std::to_string(out.end->lost_events) +
                           " events (see its messages): totals may be short");
  if (out.anomalies.undefined_stacks)
    out.warnings.push_back(std::to_string(out.anomalies.undefined_stacks) +
                           " stacks were used but never defined (shown as <unknown>)");
  if (out.anomalies.double_allocs)
    out.warnings.push_back(std::to_string(out.anomalies.double_allocs) +
                           " addresses were allocated twice without a free in between (a free was lost)");
}

// ---------------------------------------------------------------------------------------
// [6] Playing the reader thread's batches (the session driver is session.cpp)
// ---------------------------------------------------------------------------------------

namespace {

[[gnu::noinline]] void play_side(const Batch& b, const SideRecord& r, Replayer& rp, DecodeScratch& scratch) {
  switch (r.kind) {
    case SideRecord::Kind::Alloc: rp.on_alloc(r.stream, r.alloc); return;
    case SideRecord::Kind::Free: rp.on_free(r.stream, r.free); return;
    case SideRecord::Kind::Weight: rp.on_sample_weight(r.stream, SampleWeight{r.weight}); return;
    case SideRecord::Kind::Wire: {
      const uint8_t* p = b.wire.data() + r.offset;
      const uint8_t* const end = p + r.length;
      StreamRegs regs;
      regs.time = r.time;
      while (p < end)
        if (decode_record(p, end, regs, r.stream, scratch, rp) != DecodeError::None) break;  // checked by the decoder
      return;
    }
  }
}

// Replays a batch in order (W: rp.windowed()).
template <bool W>
void play(const Batch& b, Replayer& rp, DecodeScratch& scratch) {
  // How far ahead the events are prefetched (32: 512 bytes, 8 cache lines): they were written
  // by the reader thread, up to kAheadBytes ago.
  constexpr std::size_t kPrefetch = 32;
  // How far ahead the live map's slots are: a block freed long after it was made (a large live
  // set) has its slot out of the cache, and the replay would wait for it at each event.
  constexpr std::size_t kSlotAhead = 8;
  const BatchEvent* const ev = b.events.data();
  const uint64_t* extra = b.extra.data();
  const std::size_t n = b.events.size();
  std::size_t side = 0;
  for (std::size_t i = 0; i < kSlotAhead && i < n; ++i)
    if (ev[i].word != kBatchSide) rp.prefetch_heap_block(batch_addr(ev[i].word));
  for (std::size_t i = 0; i < n; ++i) {
    __builtin_prefetch(ev + i + kPrefetch);
    __builtin_prefetch(extra + kPrefetch / 2);
    if (i + kSlotAhead < n && ev[i + kSlotAhead].word != kBatchSide)
      rp.prefetch_heap_block(batch_addr(ev[i + kSlotAhead].word));
    const BatchEvent& e = ev[i];
    const uint32_t tag = batch_tag(e.word), stream = batch_stream(e.word);
    if (tag < kTagFreeBase) [[likely]] {
      const uint64_t x = *extra++;
      Alloc a;
      a.time = e.time;
      a.addr = batch_addr(e.word);
      a.size = extra_size(x);
      a.stack = extra_stack(x);
      a.api = static_cast<Api>(tag & 31);
      rp.alloc<W>(stream, a);
    } else if (e.word != kBatchSide) [[likely]] {
      Free f;
      f.time = e.time;
      f.addr = batch_addr(e.word);
      f.length = 0;
      f.api = static_cast<Api>(tag & 31);
      rp.free<W>(stream, f);
    } else {
      play_side(b, b.side[side++], rp, scratch);
    }
  }
}

}  // namespace

void ReplayerDelete::operator()(Replayer* r) const { delete r; }

ReplayerPtr make_replayer(Model& m, const ReplayOptions& o) { return ReplayerPtr(new Replayer(m, o)); }

void replay_batch(Replayer& rp, const Batch& b, DecodeScratch& scratch) {
  rp.windowed() ? play<true>(b, rp, scratch) : play<false>(b, rp, scratch);
}

void replay_rest(Replayer& rp, EventMerger& merger) { merger.finish(rp); }

void finish_into(const Replayer& rp, Model& out) { rp.finish_into(out); }

bool passed(const Replayer& rp) { return rp.passed(); }


}  // namespace memtide::analysis::detail
