#include "viewer/histogram_model.h"

#include <algorithm>

#include "viewer/format.h"

namespace memtide::viewer {

HistogramData make_histogram(const analysis::SizeHistogramResult& r) {
  HistogramData d;
  d.error = r.error;
  d.warning = r.warning;
  if (!r.ok()) return d;
  d.classes = r.histogram.classes();
  for (const analysis::SizeClass& c : d.classes) {
    d.allocations += c.allocations;
    d.bytes += c.bytes;
    d.most_allocations = std::max(d.most_allocations, c.allocations);
    d.most_bytes = std::max(d.most_bytes, c.bytes);
  }
  return d;
}

std::string size_class_label(const analysis::SizeClass& c) {
  return format_bytes(c.min_size) + " .. " + format_bytes(c.max_size);
}

std::string size_class_tick(const analysis::SizeClass& c) {
  // Class bounds are powers of two: "4 KiB", not format_bytes' "4.00 KiB".
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  uint64_t v = c.max_size;
  unsigned u = 0;
  while (v >= 1024 && v % 1024 == 0 && u + 1 < std::size(kUnits)) v /= 1024, ++u;
  return std::to_string(v) + " " + kUnits[u];
}

HistogramJob::~HistogramJob() { stop(); }

void HistogramJob::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  stop_.store(false);
}

void HistogramJob::want(const std::string& path, uint64_t key, TimeRange window, uint64_t time_base) {
  if (busy()) {
    // A live file's refresh waits for the read of the same range to end; another file or range
    // abandons it.
    if (path == path_ && window == window_) return;
    stop();
  }
  if (done(path, key)) return;
  if (thread_.joinable()) thread_.join();  // finished
  path_ = path;
  window_ = window;
  progress_.store(0);
  busy_.store(true, std::memory_order_release);
  const uint64_t from = window.empty() ? 0 : time_base + window.from;
  const uint64_t to = window.empty() ? UINT64_MAX : time_base + window.to;
  thread_ = std::thread([this, path, key, window, from, to] {
    auto progress = [&](uint64_t done, uint64_t total) {
      progress_.store(total ? static_cast<float>(static_cast<double>(done) / static_cast<double>(total)) : 0.0f,
                      std::memory_order_relaxed);
      return !stop_.load(std::memory_order_relaxed);
    };
    const analysis::SizeHistogramResult r = analysis::size_histogram_of_file(path, progress, from, to);
    if (!stop_.load()) {
      auto d = std::make_shared<HistogramData>(make_histogram(r));
      d->path = path;
      d->key = key;
      d->window = window;
      std::lock_guard lock(mu_);
      result_ = std::move(d);
    }
    busy_.store(false, std::memory_order_release);
  });
}

std::shared_ptr<const HistogramData> HistogramJob::result() const {
  std::lock_guard lock(mu_);
  return result_;
}

bool HistogramJob::done(const std::string& path, uint64_t key) const {
  std::lock_guard lock(mu_);
  return result_ && result_->path == path && result_->key == key;
}

}  // namespace memtide::viewer
