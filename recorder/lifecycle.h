// The recorder's life in its process (lifecycle.cpp): start-up and its end.
#pragma once

namespace memtide::rec {

// Starts the recorder if it has not started (possibly from inside the very first allocation:
// everything but the file and the writer thread, which start() adds). Whether it records.
bool ensure_started();

}  // namespace memtide::rec
