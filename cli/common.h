// Output conventions shared by every memtide-cli subcommand.
//
// Errors are one line on stderr, "memtide: FILE: what (at offset N)", and exit status 2;
// warnings are "memtide: FILE: warning: what" and do not change the exit status.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memtide::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 2;

// "memtide: FILE: message" on stderr (after flushing stdout, so the order on a terminal is
// the order of events).
void print_error(std::string_view file, std::string_view message);
void print_warning(std::string_view file, std::string_view message);

// Control characters (C0, DEL, C1) and bytes that are not well-formed UTF-8 as \xNN, so that a
// hostile string cannot drive the terminal; every other character (accented, CJK) as it is.
std::string printable(std::string_view s);
// A word as a POSIX shell would need it: unchanged when safe, else in single quotes.
std::string shell_quote(std::string_view s);
// "2024-05-01T12:34:56.789Z" from nanoseconds since the epoch.
std::string iso_time_utc(uint64_t realtime_ns);
// "1.234 s", "12.5 ms", "850 ns".
std::string format_duration(uint64_t ns);
// The trace path of a `memtide run` manifest line ("pid<TAB>ppid<TAB>path"); false when the
// line has not that shape.
bool manifest_trace_path(const std::string& line, std::string& path);

// Writes `data` to `path` (created or truncated). Empty on success, else the reason
// (strerror of the call that failed).
std::string write_whole_file(const std::string& path, std::string_view data);

// Standard output that remembers why it failed. stdio keeps only an error flag, and by the
// time the output is flushed the error number of the write that failed (a full disk) is gone.
// capture_stdout() routes stdout and std::cout (in that order of bytes) through a stream whose
// writes keep the first error number; stdout_error() flushes and returns it (0: none),
// putting the original streams back.
void capture_stdout();
int stdout_error();

}  // namespace memtide::cli
