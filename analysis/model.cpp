#include "analysis/model.h"

namespace memtide::analysis {

void Series::add_slow(uint64_t time, uint64_t value) {
  if (!started_) {
    started_ = true;
    base_ = time;
  }
  if (time < base_) time = base_;  // out-of-order input lands in the first bucket
  const uint64_t bucket = base_ + (time - base_) / width_ * width_;
  if (!points_.empty() && points_.back().time >= bucket) {
    SeriesPoint& p = points_.back();
    if (value < p.min) p.min = value;
    if (value > p.max) p.max = value;
    p.last = value;
    return;
  }
  if (points_.size() == max_points_) {
    coarsen();
    add_slow(time, value);
    return;
  }
  points_.push_back({bucket, value, value, value});
  cur_start_ = bucket;
  cur_end_ = bucket + width_;
}

void Series::coarsen() {
  width_ *= 2;
  std::size_t out = 0;
  for (std::size_t i = 0; i < points_.size(); ++i) {
    SeriesPoint p = points_[i];
    p.time = base_ + (p.time - base_) / width_ * width_;
    if (out > 0 && points_[out - 1].time == p.time) {
      SeriesPoint& q = points_[out - 1];
      if (p.min < q.min) q.min = p.min;
      if (p.max > q.max) q.max = p.max;
      q.last = p.last;
    } else {
      points_[out++] = p;
    }
  }
  points_.resize(out);
  cur_start_ = points_.empty() ? 1 : points_.back().time;
  cur_end_ = points_.empty() ? 0 : cur_start_ + width_;
}

const ModuleInfo* Model::module(ModuleId id) const {
  for (const ModuleInfo& m : modules)
    if (m.id == id) return &m;
  return nullptr;
}

const ModuleInfo* Model::module_at(uint64_t ip) const {
  const ModuleInfo* best = nullptr;
  for (const ModuleInfo& m : modules)
    if (ip >= m.lo && ip < m.hi && (!best || m.load_time >= best->load_time)) best = &m;
  return best;
}

}  // namespace memtide::analysis
