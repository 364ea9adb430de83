#include "analysis/stack_history.h"

#include "analysis/replay_state.h"

namespace memtide::analysis {

void StackHistory::dense(const Track& t, std::vector<uint64_t>& bytes, std::vector<uint64_t>* blocks) const {
  bytes.assign(intervals, 0);
  if (blocks) blocks->assign(intervals, 0);
  for (std::size_t k = 0; k < t.points.size(); ++k) {
    const Point& p = t.points[k];
    const uint32_t until = k + 1 < t.points.size() ? t.points[k + 1].interval : intervals;
    for (uint32_t i = p.interval; i < until && i < intervals; ++i) {
      bytes[i] = p.bytes;
      if (blocks) (*blocks)[i] = p.blocks;
    }
  }
}

namespace detail {

void HistoryRecorder::record(uint32_t work, uint64_t bytes, uint64_t blocks) {
  if (work >= points_.size()) points_.resize(work + 1);
  std::vector<StackHistory::Point>& v = points_[work];
  const uint64_t last_bytes = v.empty() ? 0 : v.back().bytes, last_blocks = v.empty() ? 0 : v.back().blocks;
  if (bytes == last_bytes && blocks == last_blocks) return;
  if (!v.empty() && v.back().interval == cur_)
    v.back() = {cur_, bytes, blocks};
  else
    v.push_back({cur_, bytes, blocks});
}

// Twice as wide intervals: the value at the end of new interval j is the one at the end of old
// interval 2j + 1, the last point of the pair.
void HistoryRecorder::coarsen() {
  width_ *= 2;
  cur_ /= 2;
  for (std::vector<StackHistory::Point>& v : points_) {
    std::size_t out = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      StackHistory::Point p = v[i];
      p.interval /= 2;
      if (out && v[out - 1].interval == p.interval)
        v[out - 1] = p;
      else
        v[out++] = p;
      // A point equal to the one before it says nothing.
      if (out >= 2 && v[out - 1].bytes == v[out - 2].bytes && v[out - 1].blocks == v[out - 2].blocks) --out;
    }
    if (out == 1 && v[0].bytes == 0 && v[0].blocks == 0) out = 0;
    v.resize(out);
  }
}

uint64_t HistoryRecorder::mark(uint64_t time, DomainState& ds) {
  if (!started_) {
    started_ = true;
    start_ = time;
  }
  for (uint32_t s : ds.dirty) record(s, ds.work[s].cur_bytes, ds.work[s].cur_blocks);
  ds.dirty.clear();
  ds.dirty_below = ds.seq + 1;
  const auto interval_of = [&] { return time > start_ ? (time - start_) / width_ : 0; };
  while (interval_of() >= StackHistory::kMaxIntervals) coarsen();
  cur_ = static_cast<uint32_t>(interval_of());
  return start_ + (uint64_t{cur_} + 1) * width_;
}

StackHistory HistoryRecorder::finish(uint64_t end, const DomainState& ds) const {
  HistoryRecorder r = *this;
  StackHistory h;
  if (!started_) return h;
  for (uint32_t s : ds.dirty) r.record(s, ds.work[s].cur_bytes, ds.work[s].cur_blocks);
  end = std::max(end, r.start_);
  // The intervals up to the one that holds `end` (an interval ending exactly at `end` is the last).
  const auto last = [&] { return end > r.start_ ? (end - r.start_ - 1) / r.width_ : 0; };
  while (last() >= StackHistory::kMaxIntervals) r.coarsen();
  h.start = r.start_;
  h.width = r.width_;
  h.end = end;
  h.intervals = static_cast<uint32_t>(std::max<uint64_t>(last(), r.cur_)) + 1;
  for (std::size_t w = 0; w < r.points_.size(); ++w)
    if (!r.points_[w].empty()) h.tracks.push_back({StackId(ds.raw[w]), std::move(r.points_[w])});
  return h;
}

}  // namespace detail
}  // namespace memtide::analysis
