// The traces and helpers of the memtide-cli end-to-end tests: tests/cli/programs/leaky and
// reach recorded once per test process under the real LD_PRELOAD, `memtide report --json` read
// back, stacks searched by function.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "tests/cli/e2e_util.h"

namespace memtide::test {

using nlohmann::json;

// Traces recorded once for the whole suite.
inline const std::string& leaky_trace() {
  static const std::string t = [] {
    const std::string p = temp_dir() + "/leaky.mtide";
    const Proc r = record(p, MT_LEAKY);
    EXPECT_EQ(r.status, 0) << r.err;
    return p;
  }();
  return t;
}

inline const std::string& clean_trace() {
  static const std::string t = [] {
    const std::string p = temp_dir() + "/clean.mtide";
    const Proc r = record(p, std::string(MT_LEAKY) + " clean");
    EXPECT_EQ(r.status, 0) << r.err;
    return p;
  }();
  return t;
}

inline json report(const std::string& trace, const std::string& extra = "") {
  const Proc r = cli("report --json --top 1000 --frames 200 " + extra + " " + trace);
  EXPECT_EQ(r.status, 0) << r.err;
  return json::parse(r.out);
}

inline bool has_function(const json& stack, const std::string& fn, bool* inlined = nullptr) {
  for (const json& f : stack)
    if (f["function"].is_string() && f["function"].get<std::string>().find(fn) != std::string::npos) {
      if (inlined) *inlined = f.value("inlined", false);
      return true;
    }
  return false;
}

// Bytes and blocks of the items (leaks, peak_stacks, ...) whose stack passes through `fn`.
inline std::pair<uint64_t, uint64_t> by_function(const json& items, const std::string& fn) {
  uint64_t bytes = 0, count = 0;
  for (const json& it : items)
    if (has_function(it["stack"], fn)) {
      bytes += it["bytes"].get<uint64_t>();
      count += it["count"].get<uint64_t>();
    }
  return {bytes, count};
}

// The leak scan at exit (recorder/leak_scan.cpp, analysis/reach.h) on tests/cli/programs/reach.
inline const std::string& reach_trace() {
  static const std::string t = [] {
    const std::string p = temp_dir() + "/reach.mtide";
    const Proc r = record(p, "MEMTIDE_LEAK_SCAN=1 " MT_REACH);
    EXPECT_EQ(r.status, 0) << r.err;
    return p;
  }();
  return t;
}

// Bytes and blocks of one class (definite, indirect, reachable) of the leaks through `fn`.
inline std::pair<uint64_t, uint64_t> leak_class(const json& leaks, const std::string& fn, const std::string& cls) {
  uint64_t bytes = 0, count = 0;
  for (const json& it : leaks)
    if (has_function(it["stack"], fn)) {
      bytes += it.at(cls + "_bytes").get<uint64_t>();
      count += it.at(cls + "_count").get<uint64_t>();
    }
  return {bytes, count};
}

}  // namespace memtide::test
