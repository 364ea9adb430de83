// The loader's side that the UI thread calls: what it wants (a file, a window, a baseline,
// metrics and domains to build, pause) and what it picks up (the latest snapshot, progress).
// Each call takes the lock briefly and wakes the loader thread (loader.cpp).
#include "viewer/loader.h"

namespace memtide::viewer {

void Loader::open(const std::string& path) {
  std::lock_guard lk(mu_);
  want_.path = path;
  ++want_.path_gen;
  want_.window = {};
  ++want_.window_gen;
  cv_.notify_all();
}

void Loader::set_window(TimeRange r) {
  std::lock_guard lk(mu_);
  if (r == want_.window) return;
  want_.window = r;
  ++want_.window_gen;
  cv_.notify_all();
}

void Loader::open_baseline(const std::string& path) {
  std::lock_guard lk(mu_);
  want_.baseline = path;
  ++want_.baseline_gen;
  cv_.notify_all();
}

void Loader::close_baseline() { open_baseline({}); }

void Loader::want_metric(analysis::Metric m) {
  const auto i = static_cast<unsigned>(m);
  if (i >= kMetricCount) return;
  std::lock_guard lk(mu_);
  if (want_.metrics[i]) return;
  want_.metrics[i] = true;
  cv_.notify_all();
}

void Loader::want_domain(analysis::Domain d) {
  const auto i = static_cast<unsigned>(d);
  if (i >= analysis::kDomainCount) return;
  std::lock_guard lk(mu_);
  if (want_.domains[i]) return;
  want_.domains[i] = true;
  cv_.notify_all();
}

void Loader::want_tables() {
  std::lock_guard lk(mu_);
  if (want_.tables) return;
  want_.tables = true;
  want_.metrics.fill(true);
  cv_.notify_all();
}

void Loader::set_paused(bool paused) {
  std::lock_guard lk(mu_);
  want_.paused = paused;
  cv_.notify_all();
}

void Loader::retire(std::shared_ptr<const Snapshot> old) {
  if (!old) return;
  std::lock_guard lk(mu_);
  retired_.push_back(std::move(old));
  cv_.notify_all();
}

std::shared_ptr<const Snapshot> Loader::snapshot() const {
  std::lock_guard lk(mu_);
  return current_;
}

LoaderProgress Loader::progress() const {
  std::lock_guard lk(mu_);
  return progress_;
}

void Loader::set_phase(const char* phase, float fraction) {
  std::lock_guard lk(mu_);
  progress_.busy = true;
  progress_.phase = phase;
  progress_.fraction = fraction;
}

std::shared_ptr<Snapshot> Loader::copy_current() const {
  std::lock_guard lk(mu_);
  return std::make_shared<Snapshot>(*current_);
}

void Loader::publish(const std::shared_ptr<Snapshot>& s) {
  std::lock_guard lk(mu_);
  s->generation = current_->generation + 1;
  current_ = s;
}

}  // namespace memtide::viewer
