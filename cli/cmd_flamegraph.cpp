// `memtide flamegraph FILE --metric allocated|allocations|leaked|peak|temporary|live [--from T --to T]
//  [--at T] -o OUT`: folded stacks ("main;f;g 1234", read by flamegraph.pl, inferno and speedscope) for
// OUT ending in .folded or .txt (or "-": stdout), a self-contained interactive SVG for .svg.
// Values are bytes, except for allocations and temporary (numbers of allocations). The metrics are
// named as in the viewer; `count`, their former name for allocations, is still taken.
#include <CLI/CLI.hpp>

#include <cctype>
#include <iostream>
#include <map>
#include <sstream>

#include "analysis/calltree.h"
#include "analysis/flamegraph_svg.h"
#include "cli/analysis_cli.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace memtide::cli {
namespace {

using namespace memtide::analysis;

struct FlameOptions {
  std::string file, out;
  Metric metric = Metric::Allocated;
  WindowOptions window;
  bool bottom_up = false;
};

const std::map<std::string, Metric> kMetrics = {{"allocated", Metric::Allocated},
                                                {"allocations", Metric::Count},
                                                {"leaked", Metric::Leaked},
                                                {"peak", Metric::Peak},
                                                {"temporary", Metric::Temporary},
                                                {"live", Metric::LiveAt}};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int run_flamegraph(const FlameOptions& o) {
  const bool svg = ends_with(o.out, ".svg");
  if (!svg && o.out != "-" && !ends_with(o.out, ".folded") && !ends_with(o.out, ".txt")) {
    print_error(o.out, "unknown output type: use .svg (interactive flamegraph), .folded or .txt (folded stacks), or - ");
    return kExitError;
  }
  if ((o.metric == Metric::LiveAt) != !o.window.at.empty()) {
    print_error(o.file, o.window.at.empty() ? "--metric live needs --at TIME" : "--at goes with --metric live");
    return kExitError;
  }
  if (o.out != "-") {
    if (const std::string err = check_output_path(o.out, {o.file}); !err.empty()) {
      print_error(o.out, "cannot write the output file: " + err);
      return kExitError;
    }
  }
  ReplayOptions ro;
  o.window.apply(ro);
  SymbolPreload preload;
  auto model = load_model(o.file, ro, false, &preload);
  if (!model) return kExitError;
  Symbolizer sym(*model, {}, &preload);
  CallTree tree;
  tree.build(*model, sym, Domain::Heap, o.metric, o.bottom_up);

  // A file is written whole at the end (write_whole_file says why it could not be).
  std::ostringstream file;
  std::ostream* out = o.out != "-" ? static_cast<std::ostream*>(&file) : &std::cout;
  std::string metric_name;
  for (const auto& [name, m] : kMetrics)
    if (m == o.metric) metric_name = name;
  if (svg) {
    SvgOptions so;
    const bool bytes = o.metric != Metric::Count && o.metric != Metric::Temporary;
    so.bytes = bytes;
    so.unit = bytes ? "bytes" : "allocations";
    so.title = "memtide: " + std::string(o.bottom_up ? "bottom-up " : "") +
               (o.metric == Metric::Count ? "allocations" : metric_name + (bytes ? " bytes" : " allocations"));
    so.subtitle = model->process.exe.empty() ? o.file : analysis::program_label(model->process) + " (" + o.file + ")";
    if (model->has_window()) so.subtitle += ", allocations made in [" + rel_time(*model, model->window_from) + ", " +
                                            (model->window_to == UINT64_MAX ? std::string("end") : rel_time(*model, model->window_to)) + "]";
    so.palette = o.metric == Metric::Leaked ? "red" : o.metric == Metric::Temporary ? "blue" : o.metric == Metric::Peak ? "green" : "hot";
    write_flamegraph_svg(tree, so, *out);
  } else {
    tree.write_folded(*out);
  }
  if (o.out != "-") {
    if (const std::string err = write_whole_file(o.out, file.view(), {o.file}); !err.empty()) {
      print_error(o.out, "cannot write the output file: " + err);
      return kExitError;
    }
  }
  print_symbol_problems(o.file, sym);
  return kExitOk;
}

}  // namespace

Command flamegraph_command() {
  return {"flamegraph", "Write a flamegraph (.svg) or folded stacks (.folded, .txt) of one metric",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<FlameOptions>();
            sub.add_option("file", o->file, "Trace file (.mtide)")->required();
            sub.add_option("--metric", o->metric, "What the widths show: allocated (bytes, default), allocations, leaked, "
                                                  "peak (bytes live at the high-water mark), temporary, "
                                                  "live (bytes live at --at TIME)")
                ->transform(CLI::Validator(
                    [](std::string& v) -> std::string {
                      for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                      if (v == "count") v = "allocations";
                      if (const auto it = kMetrics.find(v); it != kMetrics.end()) {
                        v = std::to_string(static_cast<int>(it->second));  // parsed into the enum
                        return {};
                      }
                      std::string names;
                      for (const auto& [name, m] : kMetrics) names += (names.empty() ? "" : ", ") + name;
                      return "'" + v + "' is not a metric; one of: " + names;
                    },
                    [] {  // (the help lists the values, as CLI::IsMember's does: the completions read them)
                      std::string names;
                      for (const auto& [name, m] : kMetrics) names += (names.empty() ? "" : ",") + name;
                      return "{" + names + "}";
                    }()));
            sub.add_option("-o,--output", o->out, "Output: FILE.svg, FILE.folded, FILE.txt, or - for folded stacks on stdout")
                ->required();
            sub.add_flag("--bottom-up", o->bottom_up, "Allocation sites at the root instead of callers");
            o->window.declare(sub, true);
            return [o] { return run_flamegraph(*o); };
          }};
}

}  // namespace memtide::cli
