// `memtide report FILE --histogram`: how many heap allocations of each size were made, in
// power-of-two classes (heaptrack_print -H, memray stats), read straight from the records.
#include <array>
#include <bit>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/analysis_cli.h"
#include "cli/common.h"
#include "formats/decoder.h"
#include "formats/reader.h"

namespace memtide::cli {
namespace {

using namespace memtide::fmt;

// Class i holds sizes in (2^(i-1), 2^i]; class 0 the size 0 and 1.
struct SizeCounter : NullVisitor {
  std::array<uint64_t, 65> count{}, bytes{};
  bool sampled = false;
  void on_alloc(uint32_t, const Alloc& a) {
    if (!is_heap(a.api) || a.api == Api::Custom) return;  // (custom blocks lie inside heap blocks)
    const unsigned i = a.size <= 1 ? 0 : 64 - static_cast<unsigned>(std::countl_zero(a.size - 1));
    ++count[i];
    bytes[i] += a.size;
    sampled |= a.weight != 0;
  }
};

}  // namespace

int print_histogram(const std::string& file, bool as_json) {
  FileReader reader;
  if (const OpenResult open = reader.open(file); !open.ok()) {
    print_error(file, open.message);
    return kExitError;
  }
  SizeCounter c;
  RecordDecoder decoder;
  ProgressBar progress;
  const uint64_t total = reader.size();
  ReadResult r;
  for (Block b;;) {
    r = reader.next(b);
    if (r.ok()) r = decoder.decode(b, c);
    if (!r.ok()) break;
    progress(reader.offset(), total);
  }
  progress(total, total);
  if (r.status == ReadStatus::Corrupt || (!r.end_of_file() && r.status != ReadStatus::Truncated)) {
    print_error(file, r.message);
    return kExitError;
  }
  if (r.status == ReadStatus::Truncated) print_warning(file, r.message);
  if (c.sampled) {
    print_error(file, "the trace is sampled: its allocations are a sample, weighted by size, and their sizes make no "
                      "histogram of the program's (record it exactly for one)");
    return kExitError;
  }
  uint64_t all = 0, most = 0;
  unsigned lo = 65, hi = 0;
  for (unsigned i = 0; i < 65; ++i) {
    all += c.count[i];
    most = std::max(most, c.count[i]);
    if (c.count[i]) lo = std::min(lo, i), hi = i;
  }
  auto low_of = [](unsigned i) -> uint64_t { return i == 0 ? 0 : i == 1 ? 2 : (uint64_t{1} << (i - 1)) + 1; };
  auto high_of = [](unsigned i) -> uint64_t { return i == 0 ? 1 : uint64_t{1} << i; };
  if (as_json) {
    nlohmann::json rows = nlohmann::json::array();
    for (unsigned i = lo; i <= hi && all; ++i)
      rows.push_back({{"min_size", low_of(i)}, {"max_size", high_of(i)}, {"allocations", c.count[i]}, {"bytes", c.bytes[i]}});
    std::cout << nlohmann::json{{"file", file}, {"allocations", all}, {"histogram", rows}}.dump(2) << '\n';
    return kExitOk;
  }
  std::printf("heap allocations by size (%s in all):\n", thousands(all).c_str());
  std::printf("  %-21s %14s %7s %12s\n", "size", "allocations", "", "bytes");
  for (unsigned i = lo; i <= hi && all; ++i) {
    const std::string range = human_bytes(low_of(i)) + " .. " + human_bytes(high_of(i));
    const int bar = most ? static_cast<int>(c.count[i] * 30 / most) : 0;
    std::printf("  %-21s %14s %6.1f%% %12s  %s\n", range.c_str(), thousands(c.count[i]).c_str(),
                100.0 * static_cast<double>(c.count[i]) / static_cast<double>(all),
                human_bytes(c.bytes[i]).c_str(), paint(std::string(static_cast<std::size_t>(bar), '#'), "36").c_str());
  }
  return kExitOk;
}

}  // namespace memtide::cli
