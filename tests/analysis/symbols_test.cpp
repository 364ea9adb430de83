// Symbols from the test binary itself (libdw), build-id checks, call trees / folded stacks,
// suppressions.
#include <gtest/gtest.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "analysis/calltree.h"
#include "analysis/function_index.h"
#include "analysis/suppressions.h"
#include "analysis/symbols.h"
#include "tests/analysis/trace_builder.h"

extern "C" __attribute__((noinline, used)) int memtide_test_marker_fn(int x) {
  asm volatile("" ::: "memory");
  return x * 3 + 1;
}

namespace memtide::test {
namespace {

using namespace memtide::analysis;

// The test executable as a ModuleInfo, as the recorder would have described it.
ModuleInfo self_module(const std::string& build_id) {
  ModuleInfo m;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* mi = static_cast<ModuleInfo*>(data);
        if (info->dlpi_name && *info->dlpi_name) return 0;  // the main program has an empty name
        mi->load_bias = info->dlpi_addr;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          mi->lo = info->dlpi_addr + ph.p_vaddr;
          mi->hi = mi->lo + ph.p_memsz;
        }
        return 1;
      },
      &m);
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  m.path.assign(path, n > 0 ? static_cast<size_t>(n) : 0);
  m.id = ModuleId(1);
  m.build_id = build_id;
  return m;
}

uint64_t marker_ip() {
  // A return address just past the function's first instruction: ip - 1 is inside it.
  return reinterpret_cast<uint64_t>(&memtide_test_marker_fn) + 2;
}

TEST(Symbols, FunctionFileAndLineFromTheModuleFile) {
  Model model;
  model.modules.push_back(self_module(""));
  Symbolizer s(model);
  auto frames = s.resolve(marker_ip());
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames[0].function, "memtide_test_marker_fn");
  EXPECT_NE(frames[0].file.find("symbols_test.cpp"), std::string_view::npos);
  EXPECT_GT(frames[0].line, 0u);
  EXPECT_TRUE(s.problems().empty());
}

TEST(Symbols, FilesOpenedAheadResolveAlike) {
  Model model;
  model.modules.push_back(self_module(""));
  model.modules.push_back(self_module(std::string("\x01\x02\x03\x04", 4)));  // the same file, changed
  model.modules[1].id = ModuleId(2);
  model.modules[1].lo = model.modules[1].hi = 0;  // maps nothing: lookups of addresses go to the first
  SymbolPreload preload;
  for (const ModuleInfo& m : model.modules) preload.add(m);
  preload.add(model.modules[0]);  // queued once
  for (int i = 0; i < 2000 && preload.opened() < 2; ++i) usleep(5000);
  ASSERT_EQ(preload.opened(), 2u) << "both opened on the preload thread";

  Symbolizer s(model, {}, &preload);
  auto frames = s.resolve(marker_ip());
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames[0].function, "memtide_test_marker_fn");
  EXPECT_NE(frames[0].file.find("symbols_test.cpp"), std::string_view::npos);
  EXPECT_EQ(s.file_state(model.modules[1]), ModuleState::Mismatch) << "a changed file stays refused";
  EXPECT_TRUE(s.resolve_in_file(model.modules[1], marker_ip() - model.modules[1].load_bias).empty());

  // The replay hands every module it meets to ReplayOptions::on_module.
  TraceBuilder b;
  b.module(1, 7, "/usr/lib/libexample.so", 0x7f0000000000, 0x1000, 0x2000, "\xaa\xbb");
  std::vector<std::string> met;
  ReplayOptions o;
  o.on_module = [&](const ModuleInfo& m) { met.push_back(m.path); };
  ASSERT_TRUE(analyze(b.end(2), o));
  EXPECT_EQ(met, std::vector<std::string>{"/usr/lib/libexample.so"});
}

// The sorted index names addresses as dwfl_module_addrinfo does (which walks the whole symbol
// table per call), over the code of real modules: libstdc++ (.dynsym only), libc, this test
// binary (.symtab), and where installed clang's libLLVM and libclang-cpp (sizeless labels,
// and most of their code in local functions that only libdw could name, by a label; it names
// none so).
TEST(Symbols, FunctionIndexAgreesWithLibdw) {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        if (info->dlpi_name && (std::strstr(info->dlpi_name, "libstdc++") || std::strstr(info->dlpi_name, "libc.so.6")))
          static_cast<std::vector<std::string>*>(data)->push_back(info->dlpi_name);
        return 0;
      },
      &paths);
  ASSERT_EQ(paths.size(), 2u);
  paths.push_back(self_module("").path);
  for (const char* big : {"/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1", "/usr/lib/llvm-14/lib/libclang-cpp.so.14"})
    if (std::filesystem::exists(big)) paths.push_back(big);
  static const Dwfl_Callbacks callbacks = {nullptr, dwfl_standard_find_debuginfo, dwfl_offline_section_address, nullptr};
  for (const std::string& path : paths) {
    Dwfl* dwfl = dwfl_begin(&callbacks);
    ASSERT_NE(dwfl, nullptr);
    Dwfl_Module* mod = dwfl_report_elf(dwfl, "m", path.c_str(), -1, 0, false);
    dwfl_report_end(dwfl, nullptr, nullptr);
    ASSERT_NE(mod, nullptr) << path;
    FunctionIndex index;
    index.build(mod);
    // The .text section (the module is reported at 0: addresses are section addresses).
    GElf_Addr bias = 0;
    Elf* elf = dwfl_module_getelf(mod, &bias);
    ASSERT_NE(elf, nullptr);
    std::size_t shstrndx = 0;
    ASSERT_EQ(elf_getshdrstrndx(elf, &shstrndx), 0);
    uint64_t lo = 0, hi = 0;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh)) continue;
      const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
      if (name && std::strcmp(name, ".text") == 0) lo = sh.sh_addr + bias, hi = lo + sh.sh_size;
    }
    ASSERT_LT(lo, hi) << path;
    const uint64_t step = std::max<uint64_t>(1, (hi - lo) / 3000) | 1;
    uint64_t named = 0, compared = 0, to_libdw = 0;
    for (uint64_t a = lo; a < hi; a += step, ++compared) {
      const char* mine = index.find(a);
      GElf_Off off = 0;
      GElf_Sym sym;
      const char* theirs = dwfl_module_addrinfo(mod, a, &off, &sym, nullptr, nullptr, nullptr);
      if (!mine && index.label_may_name(a)) {  // that lookup goes to libdw anyway
        ++to_libdw;
        continue;
      }
      EXPECT_STREQ(mine, theirs) << path << " at 0x" << std::hex << a;
      named += mine != nullptr;
    }
    EXPECT_GT(named, compared / 4) << path;
    EXPECT_LT(to_libdw, compared / 20) << path;
    std::printf("%s: %llu addresses, %llu named by the index, %llu left to libdw\n", path.c_str(),
                static_cast<unsigned long long>(compared), static_cast<unsigned long long>(named),
                static_cast<unsigned long long>(to_libdw));
    dwfl_end(dwfl);
  }
}

// A module loaded in this process (by a part of its path) as the recorder would describe it.
ModuleInfo loaded_module(const char* name_part) {
  struct Find {
    const char* part;
    ModuleInfo m;
  } f{name_part, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* f = static_cast<Find*>(data);
        if (!info->dlpi_name || !std::strstr(info->dlpi_name, f->part)) return 0;
        f->m.path = info->dlpi_name;
        f->m.load_bias = info->dlpi_addr;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          f->m.lo = info->dlpi_addr + ph.p_vaddr;
          f->m.hi = f->m.lo + ph.p_memsz;
        }
        return 1;
      },
      &f);
  f.m.id = ModuleId(1);
  return f.m;
}

// Scopes found from the address's subprogram give the same frames (functions, files, lines,
// inlined callers) as dwarf_getscopes over the whole unit, across the code of this test binary
// and of libc (libc6-dbg: debug information in a separate, dwz-compressed file).
TEST(Symbols, ScopeIndexAgreesWithDwarfGetscopes) {
  for (ModuleInfo m : {self_module(""), loaded_module("libc.so.6")}) {
    ASSERT_FALSE(m.path.empty());
    ASSERT_LT(m.lo, m.hi) << m.path;
    Model model;
    model.modules.push_back(m);
    Symbolizer::Options slow_opt;
    slow_opt.scope_index = false;
    Symbolizer fast(model), slow(model, slow_opt);
    const uint64_t step = std::max<uint64_t>(1, (m.hi - m.lo) / 700) | 1;
    uint64_t compared = 0, with_lines = 0, with_inlines = 0;
    for (uint64_t ip = m.lo + 1; ip < m.hi; ip += step, ++compared) {
      const std::vector<Frame> a = fast.resolve_in_file(m, ip - m.load_bias);
      const std::vector<Frame> b = slow.resolve_in_file(m, ip - m.load_bias);
      ASSERT_EQ(a.size(), b.size()) << m.path << " +0x" << std::hex << ip - m.load_bias;
      for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].function, b[i].function) << m.path << " +0x" << std::hex << ip - m.load_bias;
        EXPECT_EQ(a[i].file, b[i].file);
        EXPECT_EQ(a[i].line, b[i].line);
        EXPECT_EQ(a[i].inlined, b[i].inlined);
      }
      with_lines += !a.empty() && a.back().line != 0;
      with_inlines += a.size() > 1;
    }
    EXPECT_GT(with_lines, compared / 2) << m.path << ": debug information expected";
    EXPECT_GT(with_inlines, 0u) << m.path;
  }
}

TEST(Symbols, BuildIdMismatchIsReportedAndNotResolved) {
  Model model;
  model.modules.push_back(self_module(std::string("\x01\x02\x03\x04", 4)));
  Symbolizer s(model);
  auto frames = s.resolve(marker_ip());
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_TRUE(frames[0].function.empty());
  EXPECT_EQ(frames[0].offset, marker_ip() - model.modules[0].load_bias);
  EXPECT_EQ(frame_label(frames[0]).find(std::string(basename_of(model.modules[0].path)) + "+0x"), 0u);
  auto p = s.problems();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].state, ModuleState::Mismatch);
}

TEST(Symbols, MissingModuleFileIsReported) {
  Model model;
  ModuleInfo m = self_module("");
  m.path = "/nonexistent/libgone.so";
  model.modules.push_back(m);
  Symbolizer s(model);
  auto frames = s.resolve(marker_ip());
  EXPECT_EQ(frame_label(frames[0]).rfind("libgone.so+0x", 0), 0u);
  ASSERT_EQ(s.problems().size(), 1u);
  EXPECT_EQ(s.problems()[0].state, ModuleState::Missing);
}

TEST(Symbols, EmbeddedSymbolsWinOverTheFile) {
  Model model;
  model.modules.push_back(self_module(std::string("\x01", 1)));  // the file would not be used
  const uint64_t off = marker_ip() - model.modules[0].load_bias;
  model.embedded[1] = {{off, "outer()", "outer.cpp", 10, 0}, {off, "inner()", "inner.h", 3, 1}};
  Symbolizer s(model);
  auto frames = s.resolve(marker_ip());
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].function, "outer()");
  EXPECT_FALSE(frames[0].inlined);
  EXPECT_EQ(frames[1].function, "inner()");
  EXPECT_TRUE(frames[1].inlined);
  EXPECT_EQ(frames[1].line, 3u);
  EXPECT_TRUE(s.problems().empty());  // the file was never needed
}

TEST(Symbols, AddressOutsideAnyModule) {
  Model model;
  Symbolizer s(model);
  auto frames = s.resolve(0x1234);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frame_label(frames[0]), "0x1234");
}

TEST(Symbols, Demangle) {
  EXPECT_EQ(demangle("_Znwm"), "operator new(unsigned long)");
  EXPECT_EQ(demangle("main"), "main");
  EXPECT_EQ(demangle("_Zbogus"), "_Zbogus");
}

// Stacks 2 = [0x100, 0x200] and 3 = [0x100, 0x300]; no modules, so labels are addresses.
std::unique_ptr<Model> tree_model() {
  TraceBuilder b;
  b.stack(1, 1, 0, {0x100}).stack(1, 2, 1, {0x200}).stack(1, 3, 1, {0x300});
  b.malloc(1, 1, 0x10, 100, 2).malloc(1, 2, 0x20, 30, 3).malloc(1, 3, 0x30, 7, 3).malloc(1, 4, 0x40, 5, 1);
  b.free(1, 5, 0x20);
  return analyze(b.end(10));
}

// The tree's folded stacks, one per line, sorted.
std::vector<std::string> sorted_folded(const CallTree& t) {
  std::ostringstream out;
  t.write_folded(out);
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::sort(lines.begin(), lines.end());
  return lines;
}

TEST(CallTree, FoldedStacksSumToTheTotals) {
  auto m = tree_model();
  ASSERT_TRUE(m);
  Symbolizer s(*m);
  CallTree t;
  t.build(*m, s, Domain::Heap, Metric::Allocated);
  std::ostringstream out;
  t.write_folded(out);
  EXPECT_EQ(out.str(), "0x100 5\n0x100;0x200 100\n0x100;0x300 37\n");
  EXPECT_EQ(t.total(), m->heap().allocated_bytes);
  CallTree leaked;
  leaked.build(*m, s, Domain::Heap, Metric::Leaked);
  EXPECT_EQ(leaked.total(), m->heap().leaked_bytes);
}

TEST(CallTree, BottomUpStartsAtTheAllocationSite) {
  auto m = tree_model();
  Symbolizer s(*m);
  CallTree t;
  t.build(*m, s, Domain::Heap, Metric::Count, true);
  EXPECT_EQ(sorted_folded(t), (std::vector<std::string>{"0x100 1", "0x200;0x100 1", "0x300;0x100 2"}));
}

// A stack whose trie has a node never defined (a cut trace) starts at <unknown> top-down and
// ends there bottom-up; stacks through that node share it. A second build into the same tree
// adds to the nodes it made.
TEST(CallTree, StacksThroughAnUndefinedNodeStartAtUnknownAndBuildsAdd) {
  TraceBuilder b;
  b.stack(1, 1, 0, {0x100}).stack(1, 5, 4, {0x500}).stack(1, 6, 5, {0x600});
  b.malloc(1, 1, 0x10, 10, 5).malloc(1, 2, 0x20, 20, 6).malloc(1, 3, 0x30, 40, 1);
  auto m = analyze(b.end(10));
  ASSERT_TRUE(m);
  Symbolizer s(*m);
  const auto folded = sorted_folded;
  CallTree t;
  t.build(*m, s, Domain::Heap, Metric::Allocated);
  EXPECT_EQ(folded(t), (std::vector<std::string>{"0x100 40", "<unknown>;0x500 10", "<unknown>;0x500;0x600 20"}));
  EXPECT_EQ(t.total(), 70u);
  t.build(*m, s, Domain::Heap, Metric::Allocated);
  EXPECT_EQ(folded(t), (std::vector<std::string>{"0x100 80", "<unknown>;0x500 20", "<unknown>;0x500;0x600 40"}));
  EXPECT_EQ(t.total(), 140u);
  EXPECT_EQ(t.nodes().size(), 5u) << "root, 0x100, <unknown>, 0x500, 0x600: the second build made none";
  CallTree up;
  up.build(*m, s, Domain::Heap, Metric::Allocated, true);
  EXPECT_EQ(folded(up), (std::vector<std::string>{"0x100 40", "0x500;<unknown> 10", "0x600;0x500;<unknown> 20"}));
}

TEST(CallTree, FoldedLabelsStayParseable) {
  EXPECT_EQ(folded_label("a;b\nc"), "a:b:c");
  EXPECT_EQ(folded_label(""), "?");
}

TEST(Suppressions, GlobLikeLeakSanitizer) {
  EXPECT_TRUE(glob_match("foo", "xxfooyy"));
  EXPECT_TRUE(glob_match("^foo", "foobar"));
  EXPECT_FALSE(glob_match("^foo", "xfoo"));
  EXPECT_TRUE(glob_match("bar$", "foobar"));
  EXPECT_FALSE(glob_match("bar$", "barfoo"));
  EXPECT_TRUE(glob_match("a*c", "xxabbbcyy"));
  EXPECT_TRUE(glob_match("^std::vector<*>::push_back$", "std::vector<int>::push_back"));
  EXPECT_FALSE(glob_match("", "anything"));
}

TEST(Suppressions, ParseCommentsTypesAndErrors) {
  SuppressionList l;
  std::string err;
  std::vector<std::string> notes;
  EXPECT_TRUE(l.parse("# comment\n\nleak:foo\n  leak:bar*baz  \nrace:x\n", "s.txt", err, notes));
  ASSERT_EQ(l.items().size(), 2u);
  EXPECT_EQ(l.items()[1].pattern, "bar*baz");
  EXPECT_EQ(l.items()[1].origin, "s.txt:4");
  EXPECT_EQ(notes.size(), 1u);
  SuppressionList bad;
  EXPECT_FALSE(bad.parse("leak:ok\nnot a suppression\n", "b.txt", err, notes));
  EXPECT_NE(err.find("b.txt:2"), std::string::npos);
}

TEST(Suppressions, MatchFunctionFileOrModuleOfAnyFrame) {
  SuppressionList l;
  std::string err;
  std::vector<std::string> notes;
  ASSERT_TRUE(l.parse("leak:cache_init\nleak:third_party/*.c\nleak:libfoo.so\n", "s", err, notes));
  const Frame main_f{"main", "main.cpp", 3, "/bin/app", 0, false};
  const Frame cache{"cache_init()", "cache.cpp", 9, "/bin/app", 0, false};
  const Frame tp{"helper", "/src/third_party/z.c", 1, "/bin/app", 0, false};
  const Frame foo{"", "", 0, "/usr/lib/libfoo.so", 0x10, false};
  EXPECT_EQ(l.match({main_f, cache}), 0);
  EXPECT_EQ(l.match({main_f, tp}), 1);
  EXPECT_EQ(l.match({foo, main_f}), 2);
  EXPECT_EQ(l.match({main_f}), -1);
}

TEST(Suppressions, BuiltinsNeedTheirAllocationSiteModule) {
  SuppressionList l;
  l.add_builtin();
  const Frame start{"_dl_init", "dl-init.c", 121, "/lib64/ld-linux-x86-64.so.2", 0, false};
  const Frame stdcxx{"", "", 0, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", 0xa57ba, false};
  const Frame mine{"my_ctor()", "lib.cpp", 5, "/opt/app/libmine.so", 0x40, false};
  EXPECT_GE(l.match({start, stdcxx}), 0);  // libstdc++'s own start-up allocation
  EXPECT_EQ(l.match({start, mine}), -1);   // a leak in the program's own library constructor
}

}  // namespace
}  // namespace memtide::test
