// The recorder's life in its process (lifecycle.cpp): start-up and its end.
#pragma once

namespace memtide::rec {

// Starts the recorder if it has not started (possibly from inside the very first allocation:
// everything but the file and the writer thread, which start() adds). Whether it records.
bool ensure_started();

struct Options;
// `memtide attach`: starts the recording with these options (the flush and counter intervals
// given or not), or after a detach starts a new trace. Whether it records.
bool start_attached(const Options& opts);
// `memtide detach`: the trace ends (End reason Detach) and the program goes on.
void finish_detached();

}  // namespace memtide::rec
