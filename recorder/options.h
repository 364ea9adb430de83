// The recorder's options, generated from their table (options.inc): the fields and defaults of
// struct Options, the parsing of MEMTIDE_* environment variables (with a warning for each bad
// value) and the rows `memtide run --help` prints (kOptions).
// Header-only and allocation-free so that both the recorder (inside the host process, before
// its allocator is usable) and the CLI (`memtide run --help`, validation) use the same code.
#pragma once

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <climits>
#include <cstring>

#include "formats/size.h"

namespace memtide::rec {

enum class AllocatorKind : uint8_t { System, Mimalloc };
enum class UnwindKind : uint8_t { Fast, Libunwind, Verify };

template <class E>
struct EnumName {
  const char* name;
  E value;
};
inline constexpr EnumName<AllocatorKind> kAllocatorNames[] = {{"system", AllocatorKind::System},
                                                               {"mimalloc", AllocatorKind::Mimalloc}};
inline constexpr EnumName<UnwindKind> kUnwindNames[] = {
    {"fast", UnwindKind::Fast}, {"libunwind", UnwindKind::Libunwind}, {"verify", UnwindKind::Verify}};

// ---------------------------------------------------------------------------------------
// Specs: how a row's value is read, and its kind for the help text.
// ---------------------------------------------------------------------------------------
enum class OptKind : uint8_t { Str, Int, Bool, Enum, Size };

struct TextSpec {
  static constexpr OptKind kind = OptKind::Str;
};
struct NumberSpec {
  static constexpr OptKind kind = OptKind::Int;
  long lo, hi;
};
struct FlagSpec {
  static constexpr OptKind kind = OptKind::Bool;
};
template <class E, size_t N>
struct ChoiceSpec {
  static constexpr OptKind kind = OptKind::Enum;
  const EnumName<E> (&names)[N];
};
struct SizeSpec {
  static constexpr OptKind kind = OptKind::Size;
  const char* min;   // as a SIZE; "": no lower bound
  const char* max;   // "": no upper bound
  const char* zero;  // what 0, always allowed, means
};

constexpr TextSpec Text() { return {}; }
constexpr NumberSpec Number(long lo, long hi) { return {lo, hi}; }
constexpr FlagSpec Flag() { return {}; }
template <class E, size_t N>
constexpr ChoiceSpec<E, N> Choice(const EnumName<E> (&names)[N]) {
  return {names};
}
constexpr SizeSpec Size(const char* min, const char* max, const char* zero) { return {min, max, zero}; }

// ---------------------------------------------------------------------------------------
// Parsing. Each returns nullptr on success, else a description of the problem (static, or
// in a buffer that the next call reuses).
// ---------------------------------------------------------------------------------------
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

namespace options_detail {
inline char g_problem[256];  // the last generated description
}

inline const char* parse_value(const char* s, TextSpec, const char*& out) {
  if (!*s) return "empty file name";
  out = s;
  return nullptr;
}

template <class T>
inline const char* parse_value(const char* s, NumberSpec spec, T& out) {
  long n = 0;
  if (const char* err = parse_int(s, spec.lo, spec.hi, n)) return err;
  out = static_cast<T>(n);
  return nullptr;
}

inline const char* parse_value(const char* s, FlagSpec, bool& out) { return parse_bool(s, out); }

// "expected a, b or c"
template <class E, size_t N>
inline const char* parse_value(const char* s, ChoiceSpec<E, N> spec, E& out) {
  for (const EnumName<E>& e : spec.names) {
    if (!std::strcmp(s, e.name)) {
      out = e.value;
      return nullptr;
    }
  }
  char* buf = options_detail::g_problem;
  size_t n = 0;
  for (size_t i = 0; i < N; ++i) {
    const char* sep = i == 0 ? "expected " : i + 1 == N ? " or " : ", ";
    const int w = std::snprintf(buf + n, sizeof options_detail::g_problem - n, "%s%s", sep, spec.names[i].name);
    if (w < 0 || static_cast<size_t>(w) >= sizeof options_detail::g_problem - n) break;
    n += static_cast<size_t>(w);
  }
  return buf;
}

inline const char* parse_value(const char* s, SizeSpec spec, uint64_t& out) {
  uint64_t v = 0, min = 0, max = UINT64_MAX;
  if (const char* err = parse_size(s, v)) return err;
  if (*spec.min) parse_size(spec.min, min);
  if (*spec.max) parse_size(spec.max, max);
  if (v != 0 && (v < min || v > max)) {
    std::snprintf(options_detail::g_problem, sizeof options_detail::g_problem, "%s (at %s %s, or 0 for %s)",
                  v < min ? "too small" : "too large", v < min ? "least" : "most", v < min ? spec.min : spec.max,
                  spec.zero);
    return options_detail::g_problem;
  }
  out = v;
  return nullptr;
}

// The default as `memtide run --help` shows it (`text`: the default as written in the table).
constexpr const char* default_text(TextSpec, const char* v, const char*) { return v; }
constexpr const char* default_text(NumberSpec, long, const char* text) { return text; }
constexpr const char* default_text(FlagSpec, bool v, const char*) { return v ? "1" : "0"; }
template <class E, size_t N>
constexpr const char* default_text(ChoiceSpec<E, N> spec, E v, const char*) {
  for (const EnumName<E>& e : spec.names)
    if (e.value == v) return e.name;
  return "";
}
constexpr const char* default_text(SizeSpec, uint64_t, const char* text) { return text; }

// ---------------------------------------------------------------------------------------
// The options, from the table
// ---------------------------------------------------------------------------------------
// Each option's place in the table.
enum OptionIndex : unsigned {
#define MEMTIDE_OPTION(field, ENV, flag, type, def, sampled, spec, help) kOption_##field,
#include "recorder/options.inc"
#undef MEMTIDE_OPTION
  kOptionCount
};
static_assert(kOptionCount <= 64);

struct Options {
#define MEMTIDE_OPTION(field, ENV, flag, type, def, sampled, spec, help) type field = def;
#include "recorder/options.inc"
#undef MEMTIDE_OPTION
  uint64_t given = 0;  // bit kOption_<field>: the option was set (by the environment, a flag, attach)
  bool was_given(OptionIndex i) const { return (given >> i) & 1; }
};

struct OptionInfo {
  const char* field;
  const char* env;   // full variable name, e.g. "MEMTIDE_MAX_DEPTH"
  const char* flag;  // `memtide run --flag`
  OptKind kind;
  const char* def;
  const char* sampled;  // the default of a sampled recording
  const char* help;
};

inline constexpr OptionInfo kOptions[] = {
#define MEMTIDE_OPTION(field, ENV, flag, type, def, sampled, spec, help) \
  {#field, "MEMTIDE_" #ENV, #flag, decltype(spec)::kind, default_text(spec, def, #def),        \
   default_text(spec, sampled, #sampled), help},
#include "recorder/options.inc"
#undef MEMTIDE_OPTION
};

// Applies `value` of the option named by `env` to `o`, which then counts it as given. Returns
// nullptr or the problem.
inline const char* apply_option(Options& o, const char* env, const char* value) {
#define MEMTIDE_OPTION(field, ENV, flag, type, def, sampled, spec, help)   \
  if (!std::strcmp(env, "MEMTIDE_" #ENV)) {                                \
    const char* problem = parse_value(value, spec, o.field);               \
    if (!problem) o.given |= uint64_t{1} << kOption_##field;               \
    return problem;                                                        \
  }
#include "recorder/options.inc"
#undef MEMTIDE_OPTION
  return "unknown option";
}

// A kept trace starts each segment from a checkpoint: with --keep, checkpoints are on whatever
// was given (this interval unless one was).
inline constexpr uint32_t kKeptCheckpointIntervalS = 10;

// The defaults that depend on the mode, applied once the options are read: a sampled
// recording's (the table's `sampled` column) for each option not given, and the checkpoints a
// kept trace needs.
inline void apply_mode_defaults(Options& o) {
  if (o.sample) {
#define MEMTIDE_OPTION(field, ENV, flag, type, def, sampled, spec, help) \
  if (!o.was_given(kOption_##field)) o.field = sampled;
#include "recorder/options.inc"
#undef MEMTIDE_OPTION
  }
  if (o.keep && !o.checkpoint_interval_s) o.checkpoint_interval_s = kKeptCheckpointIntervalS;
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
