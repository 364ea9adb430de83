#include "analysis/size_histogram.h"

#include <algorithm>
#include <bit>
#include <utility>
#include <vector>

#include "formats/decoder.h"
#include "formats/reader.h"

namespace memtide::analysis {

using namespace memtide::fmt;

unsigned SizeHistogram::class_of(uint64_t size) {
  return size <= 1 ? 0 : 64 - static_cast<unsigned>(std::countl_zero(size - 1));
}

uint64_t SizeHistogram::min_of(unsigned i) { return i == 0 ? 0 : i == 1 ? 2 : (uint64_t{1} << (i - 1)) + 1; }

uint64_t SizeHistogram::max_of(unsigned i) {
  return i == 0 ? 1 : i >= 64 ? ~uint64_t{0} : uint64_t{1} << i;
}

void SizeHistogram::add(uint64_t size) {
  const unsigned i = class_of(size);
  ++count[i];
  bytes[i] += size;
}

uint64_t SizeHistogram::allocations() const {
  uint64_t n = 0;
  for (uint64_t c : count) n += c;
  return n;
}

uint64_t SizeHistogram::total_bytes() const {
  uint64_t n = 0;
  for (uint64_t b : bytes) n += b;
  return n;
}

std::vector<SizeClass> SizeHistogram::classes() const {
  unsigned lo = kClasses, hi = 0;
  for (unsigned i = 0; i < kClasses; ++i)
    if (count[i]) lo = std::min(lo, i), hi = i;
  std::vector<SizeClass> out;
  for (unsigned i = lo; i <= hi && lo < kClasses; ++i) out.push_back({min_of(i), max_of(i), count[i], bytes[i]});
  return out;
}

namespace {

struct SizeCounter : NullVisitor {
  SizeHistogram* h;
  uint64_t from = 0, to = UINT64_MAX;
  // from/to relative to the trace's start, which is the replay's: the process's start from its
  // ProcessInfo record, unless an event came before it, else the first event. Blocks of the
  // threads' streams may come before the process stream's, so the allocations read until the
  // start is known wait in `pending` (a bounded number: past it, the first event read is taken).
  bool from_start = false;
  uint64_t first = UINT64_MAX;
  std::vector<std::pair<uint64_t, uint64_t>> pending;  // (time, size)
  bool sampled = false;
  static constexpr std::size_t kMaxPending = 1 << 20;

  void count(uint64_t time, uint64_t size) {
    if (time >= from && time <= to) h->add(size);
  }
  void set_start(uint64_t start) {
    from_start = false;
    from = start + from;
    to = to > UINT64_MAX - start ? UINT64_MAX : start + to;
    for (const auto& [time, size] : pending) count(time, size);
    pending = {};
  }
  void finish() {
    if (from_start) set_start(first == UINT64_MAX ? 0 : first);
  }
  void on_process_info(uint32_t, const ProcessInfo& p) {
    if (from_start && p.monotonic_start_ns) set_start(std::min(p.monotonic_start_ns, first));
  }
  void on_free(uint32_t, const Free& f) { first = std::min(first, f.time); }
  void on_alloc(uint32_t, const Alloc& a) {
    first = std::min(first, a.time);
    if (!is_heap(a.api) || a.api == Api::Custom) return;  // (custom blocks lie inside heap blocks)
    sampled |= a.weight != 0;  // (a sampled trace, whatever the window)
    if (!from_start) return count(a.time, a.size);
    pending.emplace_back(a.time, a.size);
    if (pending.size() >= kMaxPending) set_start(first);
  }
};

}  // namespace

SizeHistogramResult size_histogram_of_file(const std::string& path, const std::function<bool(uint64_t, uint64_t)>& progress,
                                           uint64_t from, uint64_t to, bool from_start) {
  SizeHistogramResult out;
  FileReader reader;
  if (const OpenResult open = reader.open(path); !open.ok()) {
    out.error = open.message;
    return out;
  }
  SizeCounter c;
  c.h = &out.histogram;
  c.from = from;
  c.to = to;
  c.from_start = from_start;
  RecordDecoder decoder;
  const uint64_t total = reader.size();
  ReadResult r;
  for (Block b;;) {
    r = reader.next(b);
    if (r.ok()) r = decoder.decode(b, c);
    if (!r.ok()) break;
    if (progress && !progress(reader.offset(), total)) {
      out.error = "stopped";
      return out;
    }
  }
  c.finish();
  if (progress) progress(total, total);
  if (r.status == ReadStatus::Corrupt || (!r.end_of_file() && r.status != ReadStatus::Truncated)) {
    out.error = r.message;
    return out;
  }
  if (r.status == ReadStatus::Truncated) out.warning = r.message;
  if (c.sampled) {
    out.sampled = true;
    out.error = "the trace is sampled: its allocations are a sample, weighted by size, and their sizes make no "
                "histogram of the program's (record it exactly for one)";
  }
  return out;
}

}  // namespace memtide::analysis
