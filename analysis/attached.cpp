#include "analysis/attached.h"

#include "analysis/format.h"

namespace memtide::analysis {

uint64_t freed_before_recording(const Model& m) {
  uint64_t n = 0;
  for (uint64_t c : m.freed_before_recording) n += c;
  return n;
}

std::string attached_note(const Model& m) {
  if (!m.process.attached) return {};
  std::string note = "recording started at attach time (memtide attach), not at the program's start";
  if (const uint64_t n = freed_before_recording(m))
    note += "; " + format_count(n) + (n == 1 ? " block" : " blocks") +
            " freed, allocated before recording (counted apart, not in the heap)";
  return note;
}

}  // namespace memtide::analysis
