// The recorder's options (table in options.inc), parsed from MEMTIDE_* environment variables.
// Header-only and allocation-free so that both the recorder (inside the host process, before
// its allocator is usable) and the CLI (`memtide run --help`, validation) use the same code.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <climits>
#include <cstring>

#include "formats/size.h"

namespace memtide::rec {

enum class OptKind : uint8_t { Str, Int, Bool, Enum, Size };

struct OptionInfo {
  const char* field;
  const char* env;   // full variable name, e.g. "MEMTIDE_MAX_DEPTH"
  const char* flag;  // `memtide run --flag`
  OptKind kind;
  const char* def;
  const char* help;
};

inline constexpr OptionInfo kOptions[] = {
#define MEMTIDE_OPTION(field, ENV, flag, kind, def, help) \
  {#field, "MEMTIDE_" #ENV, #flag, OptKind::kind, def, help},
#include "recorder/options.inc"
#undef MEMTIDE_OPTION
};

enum class AllocatorKind : uint8_t { System, Mimalloc };
enum class UnwindKind : uint8_t { Fast, Libunwind, Verify };

struct Options {
  const char* output = "memtide.%e.%p.mtide";
  uint32_t max_depth = 64;
  bool follow = true;
  AllocatorKind allocator = AllocatorKind::System;
  UnwindKind unwind = UnwindKind::Fast;
  uint32_t counter_interval_ms = 10;
  uint32_t flush_interval_ms = 20;
  int compression = 0;
  uint64_t max_size = 0;  // bytes; 0: no limit
  uint64_t sample = 0;    // mean sampling interval in bytes; 0: exact
  uint64_t sample_seed = 0;
  bool leak_scan = false;
  bool quiet = false;
};

// Parses one option value. Returns nullptr on success, else a static description of the problem.
inline const char* parse_int(const char* s, long lo, long hi, long& out) {
  if (!s || !*s) return "expected a number";
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (errno || *end) return "expected a number";
  if (v < lo || v > hi) return "out of range";
  out = v;
  return nullptr;
}

// A size in bytes, as every option taking one reads it (formats/size.h).
using fmt::parse_size;

inline const char* parse_bool(const char* s, bool& out) {
  if (!std::strcmp(s, "1") || !std::strcmp(s, "yes") || !std::strcmp(s, "true") || !std::strcmp(s, "on")) {
    out = true;
    return nullptr;
  }
  if (!std::strcmp(s, "0") || !std::strcmp(s, "no") || !std::strcmp(s, "false") || !std::strcmp(s, "off")) {
    out = false;
    return nullptr;
  }
  return "expected 1 or 0";
}

// Applies `value` of the option named by `env` to `o`. Returns nullptr or the problem.
inline const char* apply_option(Options& o, const char* env, const char* value) {
  long n = 0;
  const char* err = nullptr;
  if (!std::strcmp(env, "MEMTIDE_OUTPUT")) {
    if (!*value) return "empty file name";
    o.output = value;
  } else if (!std::strcmp(env, "MEMTIDE_MAX_DEPTH")) {
    if (!(err = parse_int(value, 1, 1024, n))) o.max_depth = static_cast<uint32_t>(n);
  } else if (!std::strcmp(env, "MEMTIDE_FOLLOW")) {
    err = parse_bool(value, o.follow);
  } else if (!std::strcmp(env, "MEMTIDE_ALLOCATOR")) {
    if (!std::strcmp(value, "system")) o.allocator = AllocatorKind::System;
    else if (!std::strcmp(value, "mimalloc")) o.allocator = AllocatorKind::Mimalloc;
    else err = "expected system or mimalloc";
  } else if (!std::strcmp(env, "MEMTIDE_UNWIND")) {
    if (!std::strcmp(value, "fast")) o.unwind = UnwindKind::Fast;
    else if (!std::strcmp(value, "libunwind")) o.unwind = UnwindKind::Libunwind;
    else if (!std::strcmp(value, "verify")) o.unwind = UnwindKind::Verify;
    else err = "expected fast, libunwind or verify";
  } else if (!std::strcmp(env, "MEMTIDE_COUNTER_INTERVAL_MS")) {
    if (!(err = parse_int(value, 0, 60000, n))) o.counter_interval_ms = static_cast<uint32_t>(n);
  } else if (!std::strcmp(env, "MEMTIDE_FLUSH_INTERVAL_MS")) {
    if (!(err = parse_int(value, 10, 500, n))) o.flush_interval_ms = static_cast<uint32_t>(n);
  } else if (!std::strcmp(env, "MEMTIDE_COMPRESSION")) {
    if (!(err = parse_int(value, 0, 12, n))) o.compression = static_cast<int>(n);
  } else if (!std::strcmp(env, "MEMTIDE_MAX_SIZE")) {
    uint64_t v = 0;
    if (!(err = parse_size(value, v))) {
      if (v != 0 && v < 64 * 1024) err = "too small (at least 64KiB, or 0 for no limit)";
      else o.max_size = v;
    }
  } else if (!std::strcmp(env, "MEMTIDE_SAMPLE")) {
    uint64_t v = 0;
    if (!(err = parse_size(value, v))) {
      if (v > (uint64_t{1} << 30)) err = "too large (at most 1GiB, or 0 for exact recording)";
      else o.sample = v;
    }
  } else if (!std::strcmp(env, "MEMTIDE_SAMPLE_SEED")) {
    if (!(err = parse_int(value, 0, LONG_MAX, n))) o.sample_seed = static_cast<uint64_t>(n);
  } else if (!std::strcmp(env, "MEMTIDE_LEAK_SCAN")) {
    err = parse_bool(value, o.leak_scan);
  } else if (!std::strcmp(env, "MEMTIDE_QUIET")) {
    err = parse_bool(value, o.quiet);
  } else {
    return "unknown option";
  }
  return err;
}

// Reads every MEMTIDE_* option from the environment. For each bad value calls
// `warn(env, value, problem)` and keeps the default.
template <typename Warn>
inline Options options_from_env(Warn&& warn) {
  Options o;
  for (const OptionInfo& info : kOptions) {
    const char* v = std::getenv(info.env);
    if (!v) continue;
    if (const char* err = apply_option(o, info.env, v)) warn(info.env, v, err);
  }
  return o;
}

}  // namespace memtide::rec
