#include "cli/analysis_cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "analysis/alloc_site.h"
#include "analysis/definitions.h"
#include "analysis/suppressions.h"
#include "analysis/format.h"
#include "cli/common.h"
#include "formats/size.h"

namespace memtide::cli {

using namespace memtide::analysis;

std::optional<uint64_t> parse_time(const std::string& s) {
  if (s.empty()) return std::nullopt;
  std::size_t pos = 0;
  double v;
  try {
    v = std::stod(s, &pos);
  } catch (...) {
    return std::nullopt;
  }
  const std::string unit = s.substr(pos);
  double mul;
  if (unit.empty() || unit == "s") mul = 1e9;
  else if (unit == "ms") mul = 1e6;
  else if (unit == "us") mul = 1e3;
  else if (unit == "ns") mul = 1;
  else if (unit == "min") mul = 60e9;
  else return std::nullopt;
  const double ns = v * mul;
  if (!std::isfinite(ns) || ns < 0 || ns > 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(std::llround(ns));
}

std::optional<uint64_t> parse_size(const std::string& s) {
  uint64_t v = 0;
  if (fmt::parse_size(s.c_str(), v)) return std::nullopt;
  return v;
}

std::string human_bytes(uint64_t b) { return format_bytes(b, BytesStyle::Text); }

std::string thousands(uint64_t n) { return format_count(n); }

std::string count_of(uint64_t n, const char* singular, const char* plural) {
  return thousands(n) + " " + (n == 1 ? singular : plural);
}

std::string rel_time(const Model& m, uint64_t t) { return format_duration(t >= m.time_base ? t - m.time_base : 0); }

void WindowOptions::declare(CLI::App& sub, bool with_at) {
  const CLI::Validator time_check(
      [](std::string& v) -> std::string {
        return parse_time(v) ? std::string() : "not a time: '" + v + "' (examples: 1.5s, 250ms, 40us, 100ns; plain: seconds)";
      },
      "TIME");
  sub.add_option("--from", from, "Only allocations made at or after this time since the start (e.g. 2s, 150ms)")
      ->check(time_check);
  sub.add_option("--to", to,
                 "Only allocations made at or before this time since the start; leaked: not freed by then (the "
                 "trace is read no further)")
      ->check(time_check);
  if (with_at)
    sub.add_option("--at", at, "Also show what was live at this time (with --from/--to: made in the window and "
                                "still live then)")
        ->check(time_check);
  // An empty window is a mistake, not a report of nothing.
  sub.final_callback([this] {
    if (!from.empty() && !to.empty() && *parse_time(from) > *parse_time(to))
      throw CLI::ValidationError("--from " + from + " comes after --to " + to);
  });
}

void WindowOptions::apply(ReplayOptions& o) const {
  if (!from.empty()) o.from = parse_time(from);
  if (!to.empty()) o.to = parse_time(to);
  if (!at.empty()) o.at = parse_time(at);
}

namespace {


}  // namespace

std::unique_ptr<Model> load_model(const std::string& path, ReplayOptions options, bool quiet_warnings,
                                  SymbolPreload* preload) {
  auto progress = std::make_shared<ProgressBar>();
  if (progress->on) options.progress = [progress](uint64_t d, uint64_t t) { (*progress)(d, t); };
  // A trace that holds its names (memtide symbolize, memtide run) needs no module file opened
  // ahead: `memtide symbolize` named every address its stacks hold in each module it could
  // read, and a module it could not is opened (and reported) when a frame asks for it.
  if (preload && embedded_symbol_modules(path).empty())
    options.on_module = [preload](const ModuleInfo& m) { preload->add(m); };
  AnalyzeResult r = analyze_file(path, options);
  if (!r.ok()) {
    print_error(path, r.error);
    return nullptr;
  }
  // A window that ends before what a kept set holds begins: nothing of it was kept.
  if (const Model& m = *r.model; m.window_clipped_from && options.to && m.window_clipped_from > m.time_base &&
                                 *options.to < m.window_clipped_from - m.time_base) {
    char msg[200];
    std::snprintf(msg, sizeof msg, "the window ends at %.3f s, before the kept segments begin (at %.3f s): nothing of it was kept",
                  static_cast<double>(*options.to) / 1e9, static_cast<double>(m.window_clipped_from - m.time_base) / 1e9);
    print_error(path, msg);
    return nullptr;
  }
  if (!quiet_warnings)
    for (const std::string& w : r.model->warnings) print_warning(path, w);
  // A segment set says which part of the recording it still holds.
  if (std::string d = describe_set(path, r.model->time_base, r.model->last_time); !d.empty() && !quiet_warnings) {
    std::cout.flush();
    std::cerr << "memtide: " << printable(path) << ": " << d << '\n';
  }
  return std::move(r.model);
}

void print_symbol_problems(const std::string& path, const Symbolizer& s) {
  for (const ModuleProblem& p : s.problems())
    print_warning(path, printable(p.path) + ": " + module_state_name(p.state) + ": " + p.detail +
                            "; its frames are shown as module+offset");
}

std::vector<Frame> leaf_first(Symbolizer& s, StackId id) {
  std::vector<Frame> f;
  s.stack(id, f);
  std::reverse(f.begin(), f.end());
  return f;
}

nlohmann::json mismatch_json(Symbolizer& s, const Mismatch& x, std::size_t max_frames) {
  return {{"alloc_api", fmt::api_name(x.alloc_api)},
          {"free_api", fmt::api_name(x.free_api)},
          {"count", x.count},
          {"bytes", x.bytes},
          {"stack", stack_json(s, x.stack, max_frames)}};
}

nlohmann::json stack_json(Symbolizer& s, StackId id, std::size_t max_frames) {
  nlohmann::json arr = nlohmann::json::array();
  const std::vector<Frame> frames = leaf_first(s, id);
  const std::size_t site = allocation_site(frames);
  for (const Frame& f : frames) {
    if (arr.size() >= max_frames) break;
    nlohmann::json j;
    if (arr.size() == site) j["allocation_site"] = true;
    j["function"] = f.function.empty() ? frame_label(f) : std::string(f.function);
    j["file"] = f.file.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::string(f.file));
    j["line"] = f.line ? nlohmann::json(f.line) : nlohmann::json(nullptr);
    j["module"] = f.module.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::string(f.module));
    j["offset"] = f.offset;
    if (f.inlined) j["inlined"] = true;
    arr.push_back(std::move(j));
  }
  return arr;
}

std::string frame_line(const Frame& f, const char* indent, std::size_t i) {
  char number[32];
  std::snprintf(number, sizeof number, "%s#%-2zu ", indent, i);
  const std::string label = frame_label(f);
  const std::string whole = format_frame(f);
  const std::string head = style().full_names ? label : shorten_templates(label);
  return fitted_frame(number, printable(head), printable(whole.substr(std::min(label.size(), whole.size()))));
}

void add_alloc_fn_option(CLI::App& sub) {
  sub.add_option_function<std::vector<std::string>>(
         "--alloc-fn",
         [](const std::vector<std::string>& v) {
           for (const std::string& p : v) AllocFunctions::process().add(p);
         },
         "A function the program allocates through (a glob as in suppressions: ^my_alloc$), besides the built-in list (zmalloc, xmalloc, g_malloc, PyMem_Malloc, ...): stacks name the caller past it as their allocation site; repeatable")
      ->type_name("GLOB")
      ->allow_extra_args(false);
}

std::string site_line(const std::vector<Frame>& frames, const char* indent, bool tty) {
  const std::size_t site = allocation_site(frames);
  for (std::size_t k = 0; k < site; ++k)
    if (!is_library_frame(frames[k].function, frames[k].module))
      return std::string(indent) + "allocation site: " +
             (tty ? frame_line(frames[site], "", site) : "#" + std::to_string(site) + " " + printable(format_frame(frames[site]))) +
             "\n";
  return {};
}

void print_stack(Symbolizer& s, StackId id, std::size_t max_frames, const char* indent) {
  const std::vector<Frame> frames = leaf_first(s, id);
  std::fputs(site_line(frames, indent, true).c_str(), stdout);
  std::size_t i = 0;
  for (const Frame& f : frames) {
    if (i == max_frames) {
      std::printf("%s... %s\n", indent, count_of(frames.size() - i, "more frame", "more frames").c_str());
      break;
    }
    std::printf("%s\n", frame_line(f, indent, i++).c_str());
  }
  if (frames.empty()) std::printf("%s(empty stack)\n", indent);
}

}  // namespace memtide::cli
