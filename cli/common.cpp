#include "cli/common.h"

#include <ext/stdio_sync_filebuf.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "analysis/format.h"
#include "formats/checkpoint.h"
#include "formats/reader.h"
#include "formats/segment_set.h"

namespace memtide::cli {

void print_error(std::string_view file, std::string_view message) {
  std::cout.flush();
  std::cerr << "memtide: " << printable(file) << ": " << message << '\n';
}

void print_warning(std::string_view file, std::string_view message) {
  std::cout.flush();
  std::cerr << "memtide: " << printable(file) << ": warning: " << message << '\n';
}

namespace {
// The length of the well-formed UTF-8 sequence of a printable character at `s[i]` (not a C1
// control, U+0080..U+009F, which terminals act on), or 0.
std::size_t utf8_printable_at(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t n;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1fu;
  else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0fu;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07u;
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3fu);
  }
  const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp < 0xa0) return 0;
  return n;
}
}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (const std::size_t n = c >= 0x80 ? utf8_printable_at(s, i) : 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
    }
  }
  return out;
}

bool manifest_trace_path(const std::string& line, std::string& path) {
  const auto t1 = line.find('\t');
  const auto t2 = t1 == std::string::npos ? std::string::npos : line.find('\t', t1 + 1);
  if (t2 == std::string::npos) return false;
  path = line.substr(t2 + 1);
  return true;
}

std::string shell_quote(std::string_view s) {
  bool safe = !s.empty();
  for (unsigned char c : s)
    if (!(std::isalnum(c) || std::string_view("%+,-./:=@_").find(static_cast<char>(c)) != std::string_view::npos))
      safe = false;
  if (safe) return std::string(s);
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return printable(out + "'");
}

std::string iso_time_utc(uint64_t realtime_ns) {
  const auto secs = static_cast<std::time_t>(realtime_ns / 1000000000u);
  std::tm tm{};
  if (!gmtime_r(&secs, &tm)) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<unsigned>(realtime_ns % 1000000000u / 1000000u));
  return buf;
}

std::string format_duration(uint64_t ns) { return analysis::format_duration(ns, analysis::DurationStyle::Fixed3); }

std::string describe_set(const std::string& path, uint64_t start_ns, uint64_t last_ns, uint64_t* bytes) {
  fmt::FileReader r;
  if (!r.open(path).ok() || !r.segment_set()) return {};
  const auto& segs = r.segment_set()->segments();
  if (bytes) *bytes = r.size() - segs.front().base;
  // The set begins at its first usable checkpoint when its first segments are gone.
  uint64_t from = start_ns;
  bool unknown = false;  // cut, with no checkpoint to start from
  if (r.starts_mid_run()) {
    const std::vector<fmt::CheckpointHead> heads = fmt::find_checkpoints(r);
    if (!heads.empty()) from = heads.front().time;
    unknown = heads.empty();
  }
  auto secs = [&](uint64_t t) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f s", t > start_ns ? static_cast<double>(t - start_ns) / 1e9 : 0.0);
    return std::string(b);
  };
  const std::string range = unknown ? "no checkpoint, up to " + secs(last_ns) : secs(from) + " - " + secs(std::max(from, last_ns));
  char nums[48];
  if (r.segment_set()->alone()) {
    std::snprintf(nums, sizeof nums, "segment %04u of a kept set, alone", segs.front().number);
    return nums + (", " + range);
  }
  std::snprintf(nums, sizeof nums, "segments %04u-%04u of ", segs.front().number, segs.back().number);
  return nums + printable(r.segment_set()->stem() + ".mtide") + ", " + range;
}

namespace {

// Writes all `n` bytes (again after EINTR). Returns 0, or the errno of the write that failed;
// `done` is what was written.
int write_all(int fd, const char* p, std::size_t n, std::size_t& done) {
  for (done = 0; done < n;) {
    const ssize_t w = ::write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    done += static_cast<std::size_t>(w);
  }
  return 0;
}

}  // namespace

namespace {

// `path` with a symbolic link at its end followed (to where it points, existing or not), so
// that the rename replaces the file the link names and not the link.
std::string through_links(const std::string& path) {
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    char buf[4096];
    const ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
    if (n <= 0) break;
    const std::string target(buf, static_cast<std::size_t>(n));
    const std::size_t slash = p.rfind('/');
    p = target[0] == '/' || slash == std::string::npos ? target : p.substr(0, slash + 1) + target;
  }
  return p;
}

std::string dir_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string check_output_path(const std::string& path, const std::vector<std::string>& inputs) {
  if (path.empty()) return "empty file name";
  // By name too, for an input still to come (the trace of memtide run --check).
  std::error_code ec;
  const std::filesystem::path out_name = std::filesystem::weakly_canonical(through_links(path), ec);
  for (const std::string& in : inputs) {
    std::error_code ec2;
    if (!ec && std::filesystem::weakly_canonical(in, ec2) == out_name && !ec2)
      return "it is the input file " + printable(in) + " (no command writes over its own input)";
  }
  struct stat out;
  if (::stat(path.c_str(), &out) == 0) {
    if (S_ISDIR(out.st_mode)) return "it is a directory";
    for (const std::string& in : inputs) {
      struct stat st;
      if (::stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino)
        return "it is the input file " + printable(in) + " (no command writes over its own input)";
    }
  }
  const std::string dir = dir_of(through_links(path));
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return std::strerror(errno);
  return "";
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

std::string OutputFile::open(const std::string& path, const std::vector<std::string>& inputs) {
  if (std::string e = check_output_path(path, inputs); !e.empty()) return e;
  final_ = through_links(path);
  // What is not a regular file (/dev/stdout, a pipe, a device) is written to as it is: there is
  // nothing to replace.
  struct stat st;
  if (::stat(final_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    fd_ = ::open(final_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    return fd_ < 0 ? std::strerror(errno) : "";
  }
  const std::size_t slash = final_.rfind('/');
  std::string pattern = (slash == std::string::npos ? std::string() : final_.substr(0, slash + 1)) + "." +
                        final_.substr(slash == std::string::npos ? 0 : slash + 1) + ".XXXXXX";
  fd_ = ::mkostemp(pattern.data(), O_CLOEXEC);  // (mode 0600)
  if (fd_ < 0) return std::string("cannot create a file beside it: ") + std::strerror(errno);
  temp_ = pattern;
  return "";
}

std::string OutputFile::commit() {
  std::string err;
  if (fd_ >= 0 && ::close(fd_) != 0) err = std::strerror(errno);
  fd_ = -1;
  if (temp_.empty()) return err;  // (written in place)
  if (err.empty() && ::rename(temp_.c_str(), final_.c_str()) != 0) err = std::strerror(errno);
  if (err.empty()) temp_.clear();  // (else the destructor removes it)
  return err;
}

std::string write_whole_file(const std::string& path, std::string_view data, const std::vector<std::string>& inputs) {
  OutputFile out;
  if (std::string e = out.open(path, inputs); !e.empty()) return e;
  std::size_t done = 0;
  if (const int e = write_all(out.fd(), data.data(), data.size(), done); e != 0) return std::strerror(e);
  return out.commit();
}

Style& style() {
  static Style s;
  return s;
}

void set_style(bool full_names, const std::string& color) {
  Style& s = style();
  s.full_names = full_names;
  const bool tty = isatty(STDOUT_FILENO) == 1;
  const char* no_color = std::getenv("NO_COLOR");
  const char* term = std::getenv("TERM");
  s.color = color == "always" ||
            (color == "auto" && tty && !(no_color && *no_color) && !(term && std::strcmp(term, "dumb") == 0));
  s.width = 0;
  winsize ws{};
  if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) s.width = ws.ws_col;
}

std::string shorten_templates(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  int depth = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (depth == 0 && c == '<') {
      // An operator's own '<' (operator<, operator<<, operator<=, operator<=>) opens no list.
      const std::string_view before = name.substr(0, i);
      std::size_t op = before.size();
      while (op > 0 && before[op - 1] == '<') --op;
      if (before.substr(0, op).ends_with("operator")) {
        out += c;
        continue;
      }
      out += "<...";
      depth = 1;
    } else if (depth > 0) {
      if (c == '<') ++depth;
      if (c == '>' && --depth == 0) out += '>';
    } else {
      out += c;
    }
  }
  if (depth > 0) out += '>';  // (a name cut short)
  return out;
}

std::string paint(std::string_view s, const char* sgr) {
  if (!style().color || s.empty()) return std::string(s);
  return std::string("\033[") + sgr + "m" + std::string(s) + "\033[0m";
}

std::string fitted_frame(std::string_view indent, std::string_view head, std::string_view tail) {
  std::string h(head), t(tail);
  const std::size_t width = style().width;
  if (width && indent.size() + h.size() + t.size() > width) {
    const std::size_t room = width > indent.size() + 4 ? width - indent.size() - 3 : 1;
    if (h.size() >= room) {
      h.resize(room);
      t.clear();
    } else {
      t.resize(room - h.size());
    }
    (t.empty() ? h : t) += "...";
  }
  return std::string(indent) + paint(h, "1") + paint(t, "2");
}

ProgressBar::ProgressBar() : on(isatty(STDERR_FILENO) == 1) {}

void ProgressBar::operator()(uint64_t done, uint64_t total) {
  if (!on || total == 0) return;
  const int pct = static_cast<int>(std::min(done, total) * 100 / total);
  if (pct == last) return;
  last = pct;
  const int width = 30, fill = pct * width / 100;
  std::fprintf(stderr, "\r[%.*s%*s] %3d%%", fill, "##############################", width - fill, "", pct);
  if (done >= total) std::fprintf(stderr, "\r%*s\r", width + 8, "");
  std::fflush(stderr);
}

std::string check_options_from_env(std::vector<std::string>& args) {
  const char* env = std::getenv(kCheckOptionsEnv);
  if (!env) return "";
  std::string word;
  auto take = [&]() -> std::string {
    if (word.empty()) return "";
    if (word[0] == '-') return "'" + word + "': give the option's name without dashes (error-exitcode=23)";
    args.push_back("--" + word);
    word.clear();
    return "";
  };
  for (const char* c = env;; ++c) {
    if (*c == 0 || *c == ' ' || *c == ':' || *c == '\t' || *c == '\n') {
      if (std::string err = take(); !err.empty()) return err;
      if (*c == 0) break;
    } else {
      word += *c;
    }
  }
  return "";
}

namespace {
int g_stdout_errno = 0;
FILE* g_saved_stdout = nullptr;
std::streambuf* g_saved_coutbuf = nullptr;

ssize_t stdout_write(void*, const char* buf, std::size_t n) {
  std::size_t done = 0;
  if (const int e = write_all(STDOUT_FILENO, buf, n, done); e != 0) {
    if (!g_stdout_errno) g_stdout_errno = e;
    return done ? static_cast<ssize_t>(done) : -1;
  }
  return static_cast<ssize_t>(n);
}
}  // namespace

void capture_stdout() {
  if (g_saved_stdout) return;
  cookie_io_functions_t io{};
  io.write = stdout_write;
  FILE* f = fopencookie(nullptr, "w", io);
  if (!f) return;  // stdout as it is: failures still detected, without their reason
  setvbuf(f, nullptr, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, std::size_t{1} << 16);
  std::cout.flush();
  std::fflush(stdout);
  g_saved_stdout = stdout;
  stdout = f;
  static __gnu_cxx::stdio_sync_filebuf<char> buf(f);
  g_saved_coutbuf = std::cout.rdbuf(&buf);
}

int stdout_error() {
  std::cout.flush();
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout);
  if (g_saved_stdout) {
    std::cout.rdbuf(g_saved_coutbuf);
    FILE* f = stdout;
    stdout = g_saved_stdout;
    g_saved_stdout = nullptr;
    std::fclose(f);
  }
  if (g_stdout_errno) return g_stdout_errno;
  return failed ? EIO : 0;
}

}  // namespace memtide::cli
