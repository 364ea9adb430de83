// `memtide symbolize FILE [-o OUT]`: resolves every return address of the trace's stacks with
// the modules on this machine and appends the names as Symbols records (formats/records.h
// [4]), so that a copy of the trace read elsewhere (a CI artifact) still shows functions,
// files, lines and inlined frames. `report`, `check` and `flamegraph` prefer these names.
//
// In place, the file must end at a block boundary and no recorder may still be writing it;
// with -o the readable part of FILE is copied to OUT first and the symbols go there (this also
// works for a truncated trace). Modules whose file is missing or changed (build-id) are
// reported and left out; modules already symbolised are skipped unless --force.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>

#include "cli/analysis_cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "formats/reader.h"
#include "formats/writer.h"

namespace memtide::cli {
namespace {

using namespace memtide::analysis;

struct SymbolizeOptions {
  std::string file, out;
  bool force = false;
};

// Offset of the end of the last whole block (what a copy keeps).
bool readable_end(const std::string& path, uint64_t& end, bool& whole, std::string& err) {
  fmt::FileReader r;
  if (auto o = r.open(path); !o.ok()) {
    err = o.message;
    return false;
  }
  fmt::BlockRef b;
  fmt::ReadResult res;
  while ((res = r.skip(b)).ok()) {
  }
  end = r.offset();
  whole = res.end_of_file();
  if (!whole && res.status != fmt::ReadStatus::Truncated) {
    err = res.message;
    return false;
  }
  return true;
}

bool copy_prefix(const std::string& from, const std::string& to, uint64_t n, std::string& err) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    err = from + ": " + std::strerror(errno);
    return false;
  }
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    err = to + ": " + std::strerror(errno);
    ::close(in);
    return false;
  }
  std::vector<char> buf(1 << 20);
  bool ok = true;
  while (n > 0 && ok) {
    const ssize_t got = ::read(in, buf.data(), std::min<uint64_t>(n, buf.size()));
    if (got <= 0) {
      ok = false;
      err = from + ": read error";
      break;
    }
    for (ssize_t done = 0; done < got;) {
      const ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(got - done));
      if (w < 0) {
        ok = false;
        err = to + ": " + std::strerror(errno);
        break;
      }
      done += w;
    }
    n -= static_cast<uint64_t>(got);
  }
  ::close(in);
  if (::close(out) != 0 && ok) {
    ok = false;
    err = to + ": " + std::strerror(errno);
  }
  return ok;
}

int run_symbolize(const SymbolizeOptions& o) {
  const std::string target = o.out.empty() ? o.file : o.out;
  uint64_t end = 0;
  bool whole = false;
  std::string err;
  if (!readable_end(o.file, end, whole, err)) {
    print_error(o.file, err);
    return kExitError;
  }
  if (o.out.empty()) {
    if (fmt::is_being_written(o.file)) {
      print_error(o.file, "a recorder is still writing this trace; symbolize it when the program has ended");
      return kExitError;
    }
    if (!whole) {
      print_error(o.file, "the trace ends inside a block (truncated); use -o OUT to write a symbolised copy of the "
                          "readable part");
      return kExitError;
    }
  }
  ReplayOptions ro;
  ro.per_stack = false;
  auto model = load_model(o.file, ro);
  if (!model) return kExitError;
  if (!o.out.empty() && !copy_prefix(o.file, o.out, end, err)) {
    print_error(o.out, err);
    return kExitError;
  }

  // Distinct return addresses per module.
  std::map<const ModuleInfo*, std::vector<uint64_t>> offsets;
  uint64_t outside = 0;
  model->stack_table.for_each([&](StackId, const StackTable::Node& n) {
    const ModuleInfo* m = model->module_at(n.ip);
    if (!m) {
      ++outside;
      return;
    }
    offsets[m].push_back(n.ip - m->load_bias);
  });

  Symbolizer::Options so;
  so.use_embedded = false;
  Symbolizer sym(*model, so);
  fmt::TraceWriter w;
  try {
    w.open_append(target, fmt::TraceWriter::Options{});
  } catch (const std::exception& e) {
    print_error(target, e.what());
    return kExitError;
  }
  uint64_t modules = 0, addresses = 0, named = 0, skipped = 0;
  for (auto& [m, offs] : offsets) {
    std::sort(offs.begin(), offs.end());
    offs.erase(std::unique(offs.begin(), offs.end()), offs.end());
    if (!o.force && model->embedded.count(m->id.value)) {
      ++skipped;
      continue;
    }
    const ModuleState st = sym.file_state(*m);
    if (st != ModuleState::Ok && st != ModuleState::NoDebugInfo) continue;  // reported below
    std::vector<fmt::SymbolEntry> entries;
    auto flush = [&] {
      if (entries.empty()) return;
      w.append_symbols(0, m->id.value, entries);
      entries.clear();
    };
    for (uint64_t off : offs) {
      const std::vector<Frame> frames = sym.resolve_in_file(*m, off);
      ++addresses;
      if (frames.empty() || (frames.size() == 1 && frames[0].function.empty() && frames[0].file.empty())) continue;
      ++named;
      uint64_t depth = 0;
      for (const Frame& f : frames) entries.push_back({off, f.function, f.file, f.line, depth++});
      if (entries.size() >= 20000) flush();
    }
    flush();
    ++modules;
  }
  try {
    w.close();
  } catch (const std::exception& e) {
    print_error(target, e.what());
    return kExitError;
  }
  std::cout << printable(target) << ": " << named << " of " << addresses << " addresses named in " << modules
            << " modules";
  if (skipped) std::cout << " (" << skipped << " modules already symbolised; --force to redo)";
  std::cout << '\n';
  if (outside) print_warning(o.file, std::to_string(outside) + " frames are outside every recorded module");
  for (const ModuleProblem& p : sym.problems())
    print_warning(o.file, printable(p.path) + ": " + module_state_name(p.state) + ": " + p.detail + "; not symbolised");
  return kExitOk;
}

}  // namespace

Command symbolize_command() {
  return {"symbolize", "Append resolved symbols to a trace so that a copy elsewhere still shows names",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<SymbolizeOptions>();
            sub.add_option("file", o->file, "Trace file (.mtide)")->required();
            sub.add_option("-o,--output", o->out, "Write a symbolised copy here instead of appending to FILE");
            sub.add_flag("--force", o->force, "Symbolise modules again even if the trace already has their names");
            return [o] { return run_symbolize(*o); };
          }};
}

}  // namespace memtide::cli
