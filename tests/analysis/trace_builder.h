// Synthetic traces for the analysis tests (tests/trace_builder.h) and helpers to analyse them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "analysis/replay.h"
#include "tests/trace_builder.h"

namespace memtide::test {

// Analyses bytes; when the trace cannot be opened, fails the test and returns nullptr.
inline std::unique_ptr<analysis::Model> analyze(const std::vector<uint8_t>& bytes, analysis::ReplayOptions o = {}) {
  analysis::AnalyzeResult r = analysis::analyze_memory(bytes, o);
  if (!r.ok()) {
    ADD_FAILURE() << "the synthetic trace cannot be analysed: " << r.error;
    return nullptr;
  }
  return std::move(r.model);
}

inline const analysis::StackMetrics* stack_metrics(const analysis::Model& m, uint64_t stack,
                                                   analysis::Domain d = analysis::Domain::Heap) {
  for (const auto& s : m.stacks[static_cast<unsigned>(d)])
    if (s.stack.value == stack) return &s.m;
  return nullptr;
}

}  // namespace memtide::test
