// Helpers shared by the analysis subcommands (report, check, flamegraph, diff, summary,
// symbolize): loading a trace into a model with progress and warnings, time and size
// parsing/formatting, stacks as text and JSON. Stacks in order: analysis::top_stacks
// (analysis/leaks.h).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/leaks.h"
#include "analysis/model.h"
#include "analysis/replay.h"
#include "analysis/symbols.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace memtide::cli {

// "1.5s", "250ms", "40us", "100ns"; a plain number is seconds. nullopt when malformed.
std::optional<uint64_t> parse_time(const std::string& s);
// A size as every option reads it (formats/size.h): "1048576", "500MB" (10^6), "10MiB" (2^20).
std::optional<uint64_t> parse_size(const std::string& s);
// "12 MiB", "4.0 KiB", "100 B"; "1.23 GiB".
std::string human_bytes(uint64_t bytes);
// "262,734,400": a count in text output, with thousands separators (JSON keeps plain numbers).
std::string thousands(uint64_t n);
// "1 block", "3 blocks", "1,024 blocks".
std::string count_of(uint64_t n, const char* singular, const char* plural);
// "1.234 s" relative to the trace start.
std::string rel_time(const analysis::Model& m, uint64_t t);

// Declares --from/--to (and --at when `with_at`) on `sub` with a TIME validator.
struct WindowOptions {
  std::string from, to, at;
  void declare(CLI::App& sub, bool with_at = false);
  void apply(analysis::ReplayOptions& o) const;
};

// Loads `path`. On failure prints "memtide: FILE: message" and returns nullptr (exit 2).
// Warnings (truncated, no end record, ...) are printed as "memtide: FILE: warning: ...".
// A progress bar is drawn on stderr when it is a terminal. With `preload`, the modules' files
// and debug information are opened on another thread while the trace is replayed (make the
// Symbolizer with it).
std::unique_ptr<analysis::Model> load_model(const std::string& path, analysis::ReplayOptions options,
                                            bool quiet_warnings = false, analysis::SymbolPreload* preload = nullptr);

// Prints the symbolizer's module problems as warnings (once per module).
void print_symbol_problems(const std::string& path, const analysis::Symbolizer& s);

// Frames of a stack, allocation site first (the order of LSan and heaptrack reports).
std::vector<analysis::Frame> leaf_first(analysis::Symbolizer& s, analysis::StackId id);
// The stack as JSON: [{"function","file","line","module","inlined"}...], allocation site first.
nlohmann::json stack_json(analysis::Symbolizer& s, analysis::StackId id, std::size_t max_frames);
// One kind of mismatched free: {alloc_api, free_api, count, bytes, stack} (the allocation's stack).
nlohmann::json mismatch_json(analysis::Symbolizer& s, const analysis::Mismatch& x, std::size_t max_frames);
// "    #0 f (file.cpp:12) [module]" lines.
// `memtide report --histogram`: heap allocations by size class, as text or JSON (histogram.cpp).
int print_histogram(const std::string& file, bool as_json, std::optional<uint64_t> from = {},
                    std::optional<uint64_t> to = {});

// Frame `i` of a stack as printed for a person: "#3 name (file:line) [module]", after `indent`,
// styled as style() says (names shortened, cut to the width, colour).
std::string frame_line(const analysis::Frame& f, const char* indent, std::size_t i);
void print_stack(analysis::Symbolizer& s, analysis::StackId id, std::size_t max_frames, const char* indent = "      ");
// "allocation site: #N ..." (with a newline) when the stack's allocation site lies past an
// allocation function of the program's (analysis/alloc_site.h: zmalloc, xmalloc), else empty.
// `tty`: styled and fitted as frame_line; else the whole frame.
std::string site_line(const std::vector<analysis::Frame>& leaf_first, const char* indent, bool tty);
// --alloc-fn PATTERN (repeatable): added to analysis::AllocFunctions::process().
void add_alloc_fn_option(CLI::App& sub);

}  // namespace memtide::cli
