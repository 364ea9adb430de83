// Output conventions shared by every memtide-cli subcommand.
//
// Errors are one line on stderr, "memtide: FILE: what (at offset N)", and exit status 2;
// warnings are "memtide: FILE: warning: what" and do not change the exit status.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
// For a segment set (`memtide run --keep`), the range it holds: "segments 0004-0011 of NAME,
// 12.0 s - 95.3 s" (times since the recording's start `start_ns`; the end `last_ns`, absolute);
// "" for a single file. `bytes`: the segments' bytes on disk.
std::string describe_set(const std::string& path, uint64_t start_ns, uint64_t last_ns, uint64_t* bytes = nullptr);

// The trace path of a `memtide run` manifest line ("pid<TAB>ppid<TAB>path"); false when the
// line has not that shape.
bool manifest_trace_path(const std::string& line, std::string& path);

// The options of MEMTIDE_CHECK_OPTIONS as `memtide check` arguments ("name=value" and "name",
// separated by spaces or colons, to "--name=value" and "--name"); empty, else what is wrong.
inline constexpr const char* kCheckOptionsEnv = "MEMTIDE_CHECK_OPTIONS";
std::string check_options_from_env(std::vector<std::string>& args);

// How text for a person looks, set once from the command line (main.cpp): C++ names with their
// template arguments shortened unless --full-names, lines cut to the terminal's width when
// standard output is one, colour per --color (auto: on a terminal, unless NO_COLOR is set).
struct Style {
  bool full_names = false;
  bool color = false;
  std::size_t width = 0;  // 0: lines are not cut (not a terminal)
};
Style& style();
// Sets style() from the options: `color` is auto, always or never.
void set_style(bool full_names, const std::string& color);
// "std::vector<int, std::allocator<int> >::push_back(int const&)" ->
// "std::vector<...>::push_back(int const&)": each outermost template argument list becomes
// <...> (heaptrack_print's shortening); `operator<`, `operator<<`, `operator<=>` stay.
std::string shorten_templates(std::string_view name);
// `s` between the SGR sequence `sgr` ("1" bold, "31" red, "2" dim) and a reset when colour is
// on; `s` itself otherwise.
std::string paint(std::string_view s, const char* sgr);
// A line of a stack: `head` (the function, bold) then `tail` (where it is, dim), cut with "..."
// to fit the width after `indent` columns.
std::string fitted_frame(std::string_view indent, std::string_view head, std::string_view tail);

// A progress bar on stderr while a command reads a file, when stderr is a terminal.
struct ProgressBar {
  bool on;
  int last = -1;
  ProgressBar();
  void operator()(uint64_t done, uint64_t total);
};

// Every file a command writes goes through OutputFile: written under a temporary name in the
// same directory (mode 0600: traces and what is made from them hold addresses), then renamed
// over `path` in one step, so that a failure or an interruption leaves what was there before.
// A path that names one of the command's inputs (the same device and inode, whatever the
// name: ./t.mtide, a symbolic link) is refused. A symbolic link as `path` is written through;
// what is not a regular file (/dev/stdout, a pipe) is written to in place.
class OutputFile {
 public:
  OutputFile() = default;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // removes the temporary file unless committed

  // Creates the temporary file. Empty on success, else the problem (a sentence to follow
  // "memtide: PATH: ").
  std::string open(const std::string& path, const std::vector<std::string>& inputs);
  // The name to write to (the temporary file's, or the file's own when written in place) and
  // the descriptor (valid after a successful open).
  const std::string& write_path() const { return temp_.empty() ? final_ : temp_; }
  int fd() const { return fd_; }
  // Closes the temporary file and renames it to the final name. Empty on success, else the
  // reason; the temporary file is removed either way.
  std::string commit();

 private:
  std::string final_, temp_;
  int fd_ = -1;
};

// Whether `path` could be an output of a command reading `inputs`: empty, else the problem
// (as OutputFile::open says it). Checks without creating anything (its directory writable).
std::string check_output_path(const std::string& path, const std::vector<std::string>& inputs);

// Writes `data` to `path` through an OutputFile. Empty on success, else the reason.
std::string write_whole_file(const std::string& path, std::string_view data, const std::vector<std::string>& inputs = {});

// Standard output that remembers why it failed. stdio keeps only an error flag, and by the
// time the output is flushed the error number of the write that failed (a full disk) is gone.
// capture_stdout() routes stdout and std::cout (in that order of bytes) through a stream whose
// writes keep the first error number; stdout_error() flushes and returns it (0: none),
// putting the original streams back.
void capture_stdout();
int stdout_error();

}  // namespace memtide::cli
