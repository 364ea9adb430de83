// memtide run's segment helper (cli/cmd_segment_helper.cpp), seen from the recorder: a program
// started as root that drops its privileges can no longer create or remove its kept trace's
// segments in a directory only root may write; the helper, a process of the run that keeps
// them, does it for the run's own processes and passes the new file's descriptor back.
#pragma once

namespace memtide::rec {

// MEMTIDE_SEGMENT_HELPER (the helper's abstract socket name), kept at start-up, before the
// program's main takes MEMTIDE_* out of its environment.
void segment_helper_configure();
// Has the helper create `path` (O_EXCL, for writing: returns its descriptor) or remove it
// (returns 0); -1 with errno set when there is no helper, it cannot be reached, or it refused.
// Writer thread only.
int segment_helper_create(const char* path);
int segment_helper_remove(const char* path);

}  // namespace memtide::rec
