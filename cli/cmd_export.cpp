// `memtide export FILE -o OUT [--format pprof|speedscope|massif] [--from T --to T] [--at T]`:
// the trace in another tool's format (export/): a gzipped pprof profile (go tool pprof,
// Pyroscope, Parca, Grafana), speedscope's JSON, or a massif out file (ms_print,
// massif-visualizer). Without --format the output's name chooses: .pb.gz / .pprof / .pb is
// pprof, .json speedscope, massif.out.* / .massif massif.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "cli/analysis_cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "export/massif.h"
#include "export/pprof.h"
#include "export/speedscope.h"

namespace memtide::cli {
namespace {

using namespace memtide::analysis;

struct ExportOptions {
  std::string file, out, format;
  WindowOptions window;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The format the output's name asks for; empty when it does not tell.
std::string format_of(const std::string& out) {
  const std::string name(basename_of(out));
  if (ends_with(name, ".pb.gz") || ends_with(name, ".pprof") || ends_with(name, ".pb")) return "pprof";
  if (ends_with(name, ".json")) return "speedscope";
  if (name.starts_with("massif.out") || ends_with(name, ".massif")) return "massif";
  return {};
}

int run_export(const ExportOptions& o) {
  const std::string format = o.format.empty() ? format_of(o.out) : o.format;
  if (format.empty()) {
    print_error(o.out, "cannot tell the format from the name: use --format pprof|speedscope|massif, or name it "
                       "OUT.pb.gz, OUT.json or massif.out.NAME");
    return kExitError;
  }
  // massif's snapshots are of the whole heap, and speedscope's timeline has no instant.
  if (format != "pprof" && !o.window.at.empty()) {
    print_error(o.file, "--at goes with --format pprof (in use at that time)");
    return kExitError;
  }
  if (format == "massif" && (!o.window.from.empty() || !o.window.to.empty())) {
    print_error(o.file, "--from/--to do not go with --format massif: its snapshots are of the whole heap");
    return kExitError;
  }
  // Written as it is made (a speedscope file can be hundreds of MB), to a temporary file
  // renamed at the end.
  OutputFile file;
  std::ofstream stream;
  if (o.out != "-") {
    if (const std::string err = file.open(o.out, {o.file}); !err.empty()) {
      print_error(o.out, "cannot write the output file: " + err);
      return kExitError;
    }
    stream.open(file.write_path(), std::ios::binary | std::ios::trunc);
  }
  std::ostream& out = o.out != "-" ? stream : std::cout;
  ReplayOptions ro;
  o.window.apply(ro);
  if (format == "massif") ro.series_points = 200;  // massif keeps about 100 snapshots
  SymbolPreload preload;
  auto model = load_model(o.file, ro, false, &preload);
  if (!model) return kExitError;
  Symbolizer sym(*model, {}, &preload);

  if (format == "pprof") {
    const std::string data = exporter::pprof_profile(*model, sym, {.inuse_at = !o.window.at.empty(), .source = o.file});
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
  } else if (format == "speedscope") {
    if (const std::string err = exporter::write_speedscope(o.file, *model, sym, {.exporter = "memtide " MEMTIDE_VERSION}, out);
        !err.empty()) {
      print_error(o.file, err);
      return kExitError;
    }
  } else {
    exporter::write_massif(*model, sym, {.source = o.file}, out);
  }
  if (o.out != "-") {
    stream.close();
    const std::string err = stream ? file.commit() : std::string(std::strerror(errno));
    if (!err.empty()) {
      print_error(o.out, "cannot write the output file: " + err);
      return kExitError;
    }
  }
  print_symbol_problems(o.file, sym);
  return kExitOk;
}

}  // namespace

Command export_command() {
  return {"export", "Write the trace for another tool: pprof (go tool pprof, Pyroscope, Parca, Grafana), speedscope, massif",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<ExportOptions>();
            sub.add_option("file", o->file, "Trace file (.mtide)")->required();
            sub.add_option("-o,--output", o->out, "Output file (- for standard output)")->required();
            sub.add_option("--format", o->format,
                           "pprof (gzipped profile.proto, Go's heap sample types), speedscope (JSON, the allocation "
                           "timeline per thread) or massif (ms_print, massif-visualizer); default: from the output's "
                           "name (.pb.gz, .json, massif.out.*)")
                ->check(CLI::IsMember({"pprof", "speedscope", "massif"}));
            o->window.declare(sub, true);
            sub.get_option("--at")->description("pprof: in use at this time instead of at the end (with --from/--to: "
                                                "made in the window and still live then)");
            return [o] { return run_export(*o); };
          }};
}

}  // namespace memtide::cli
