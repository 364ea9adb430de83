// The replay's mmap domain (anonymous mappings: ranges, partial munmap, mremap) and the seeding of
// a windowed replay from a checkpoint (replayer.h).
#include <algorithm>
#include <iterator>

#include "analysis/replay_class.h"
#include "analysis/replayer.h"
#include "formats/live_rules.h"

namespace memtide::analysis::detail {

void Replayer::seed(CheckpointDomain d, const CheckpointEntry& e) {
  if (d == CheckpointDomain::Mmap) {
    if (fmt::live::maps_nothing(e.addr, e.size)) return;
    const uint64_t id = next_mapping_++;
    ranges_[e.addr] = {e.addr + e.size, id};
    const uint32_t stack = before_range_ ? dom_[static_cast<unsigned>(Domain::Mmap)].index(e.stack) : kNoStack;
    mappings_[id] = {e.size, e.time, stack, false};
    mmap_all_live_ += e.size;
    return;
  }
  const unsigned map = d == CheckpointDomain::Heap ? 0 : 1;
  LiveBlock nb;
  nb.bytes = fmt::live::held_size(e.size);
  nb.api_ = static_cast<uint8_t>(e.api);
  nb.time = e.time;
  if (before_range_) nb.stack = dom_[static_cast<unsigned>(map == 0 ? Domain::Heap : Domain::Custom)].index(e.stack);
  if (e.weight) {
    nb.sampled = 1;
    weights_[map][e.addr] = e.weight;
  }
  *live_[map].insert(e.addr).first = nb;
  (map == 0 ? heap_all_live_ : custom_all_live_) += e.weight ? e.weight : nb.bytes;
}

void Replayer::seed_done(const CheckpointHead& h) {
  skip_before_ = h.time;
  interval_ = h.interval;
  for (const CheckpointThread& t : h.threads) {
    const auto id = static_cast<uint32_t>(std::min<uint64_t>(t.stream, kMaxThreadSlots));
    if (ThreadWork* tw = thread_work(id)) {
      tw->allocs += t.allocs;
      tw->frees += t.frees;
    }
    if (!t.start) continue;
    ThreadInfo& ti = thread(id);
    ti.os_tid = t.os_tid;
    ti.parent = static_cast<uint32_t>(t.parent);
    ti.start_time = t.start;
    ti.exit_time = t.exit;
    ti.name = t.name;
  }
}

// ---------------------------------------------------------------------------------------
// [4] Mmap domain
// ---------------------------------------------------------------------------------------

// Removes [lo, hi) from the live mappings; returns the bytes that were mapped.
uint64_t Replayer::unmap(uint64_t lo, uint64_t hi, uint64_t time) {
  if (hi <= lo) return 0;
  DomainState& ds = dom_[static_cast<unsigned>(Domain::Mmap)];
  uint64_t removed = 0;
  auto it = ranges_.upper_bound(lo);
  if (it != ranges_.begin()) --it;
  while (it != ranges_.end() && it->first < hi) {
    const uint64_t start = it->first;
    const MapRange r = it->second;
    if (r.end <= lo) {
      ++it;
      continue;
    }
    const uint64_t cut_lo = std::max(start, lo), cut_hi = std::min(r.end, hi);
    const uint64_t n = cut_hi - cut_lo;
    removed += n;
    mmap_all_live_ -= std::min(mmap_all_live_, n);
    it = ranges_.erase(it);
    fmt::live::Piece left[2];
    for (int k = 0, pieces = fmt::live::pieces_left(start, r.end, lo, hi, left); k < pieces; ++k) {
      const auto placed = ranges_.insert_or_assign(left[k].lo, MapRange{left[k].hi, r.mapping}).first;
      if (left[k].lo >= hi) it = std::next(placed);  // (the piece after the cut: go on past it)
    }
    auto mit = mappings_.find(r.mapping);
    if (mit == mappings_.end()) continue;
    Mapping& mp = mit->second;
    mp.live -= std::min(mp.live, n);
    const bool gone = mp.live == 0;
    if (mp.counted) ds.change(mp.stack, -static_cast<int64_t>(n), gone ? -1 : 0, time);
    if (gone) mappings_.erase(mit);
  }
  if (removed) m_.mmap_series.add(time, mmap_all_live_);
  return removed;
}

void Replayer::mmap_alloc(uint32_t stream, const Alloc& a, uint64_t bytes) {
  DomainState& ds = dom_[static_cast<unsigned>(Domain::Mmap)];
  if (fmt::live::maps_nothing(a.addr, a.size)) {
    ++m_.anomalies.bad_records;
    return;
  }
  unmap(a.addr, a.addr + a.size, a.time);  // (it replaces what was mapped there)
  if (ThreadWork* tw = thread_work(stream)) ++tw->allocs;
  const bool c = counted(a.time);
  const uint64_t id = next_mapping_++;
  ranges_[a.addr] = {a.addr + a.size, id};
  mmap_all_live_ += a.size;
  m_.mmap_series.add(a.time, mmap_all_live_);
  Mapping& mp = mappings_[id];
  mp = {a.size, a.time, kNoStack, c};
  if (!c) return;
  ++ds.t.allocations;
  ds.t.allocated_bytes += bytes;
  ApiCount& ac = m_.alloc_api[static_cast<unsigned>(a.api)];
  ++ac.calls;
  ac.bytes += bytes;
  mp.stack = ds.index(a.stack);
  if (mp.stack != kNoStack) {
    ++ds.work[mp.stack].m.alloc_count;
    ds.work[mp.stack].m.alloc_bytes += bytes;
  }
  ds.change(mp.stack, static_cast<int64_t>(a.size), 1, a.time);
}

void Replayer::mmap_free(uint32_t stream, const Free& f) {
  DomainState& ds = dom_[static_cast<unsigned>(Domain::Mmap)];
  if (ThreadWork* tw = thread_work(stream)) ++tw->frees;
  uint64_t hi;
  if (f.api == Api::Munmap) {
    if (fmt::live::maps_nothing(f.addr, f.length)) {
      ++m_.anomalies.bad_records;
      return;
    }
    hi = f.addr + f.length;
  } else {  // mremap's old mapping
    const auto it = ranges_.upper_bound(f.addr);
    const bool found = it != ranges_.begin();
    hi = fmt::live::mremap_old_end(found, found ? std::prev(it)->first : 0, found ? std::prev(it)->second.end : 0,
                                   f.addr);
    if (!hi) {
      unknown_free(Domain::Mmap, stream, f);
      return;
    }
  }
  const uint64_t n = unmap(f.addr, hi, f.time);
  if (n == 0) {
    unknown_free(Domain::Mmap, stream, f);
    return;
  }
  ++ds.t.frees;
  ds.t.freed_bytes += n;
  ApiCount& fc = m_.free_api[static_cast<unsigned>(f.api)];
  ++fc.calls;
  fc.bytes += n;
}

void seed(Replayer& rp, CheckpointDomain d, const CheckpointEntry& e) { rp.seed(d, e); }
void seed_done(Replayer& rp, const CheckpointHead& h) { rp.seed_done(h); }
void count_before_range(Replayer& rp) { rp.count_before_range(); }
void seed_marker(Replayer& rp, const CheckpointHead::MarkerCopy& m) { rp.seed_marker(m); }
ReadResult replay_block(Replayer& rp, const Block& b, DecodeScratch& scratch) { return decode_block(b, scratch, rp); }

}  // namespace memtide::analysis::detail
