// A trace recorded by `memtide attach`: the recording began while the process ran, so the
// frees of blocks allocated before it are expected, counted apart rather than as anomalies.
#pragma once

#include <string>

#include "analysis/model.h"

namespace memtide::analysis {

// The blocks freed during the recording that were allocated before it, every domain.
uint64_t freed_before_recording(const Model& m);

// What readers say of an attached trace ("recording started at attach time ..."); empty for
// a trace recorded from the program's start.
std::string attached_note(const Model& m);

}  // namespace memtide::analysis
