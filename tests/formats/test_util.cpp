#include "tests/formats/test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "formats/encoder.h"

namespace memtide::test {

using namespace fmt;

namespace {
std::string hex(std::string_view s) {
  std::string out;
  char b[4];
  for (unsigned char c : s) {
    std::snprintf(b, sizeof b, "%02x", c);
    out += b;
  }
  return out;
}
std::string head(const char* name, uint32_t s) { return std::string(name) + " s=" + std::to_string(s); }
#define F(field) (" " #field "=" + std::to_string(x.field))
#define S(field) (" " #field "='" + std::string(x.field) + "'")
}  // namespace

std::string to_text(uint32_t s, const ProcessInfo& x) {
  std::string t = head("process", s) + F(pid) + F(ppid) + F(realtime_start_ns) + F(monotonic_start_ns) + F(page_size) +
                  " mode=" + std::to_string(static_cast<unsigned>(x.mode)) + F(sample_interval) + F(max_depth) +
                  F(counter_interval_ns) + S(exe) + S(cwd) + F(argc) + " argv=[";
  ArgvIterator it(x);
  for (std::string_view a; it.next(a);) t += "'" + std::string(a) + "'";
  return t + "]" + S(options);
}
std::string to_text(uint32_t s, const ModuleLoad& x) {
  std::string t = head("module_load", s) + F(time) + F(module_id) + F(load_bias) + S(path) + " build_id=" + hex(x.build_id) +
                  F(nseg) + " segs=[";
  for (uint32_t i = 0; i < x.nseg; ++i)
    t += std::to_string(x.segments[i].vaddr) + "/" + std::to_string(x.segments[i].memsz) + "/" +
         std::to_string(x.segments[i].flags) + ";";
  return t + "]";
}
std::string to_text(uint32_t s, const ModuleUnload& x) { return head("module_unload", s) + F(time) + F(module_id); }
std::string to_text(uint32_t s, const ThreadStart& x) {
  return head("thread_start", s) + F(time) + F(thread) + F(os_tid) + F(parent);
}
std::string to_text(uint32_t s, const ThreadName& x) { return head("thread_name", s) + F(time) + F(thread) + S(name); }
std::string to_text(uint32_t s, const ThreadExit& x) { return head("thread_exit", s) + F(time) + F(thread); }
std::string to_text(uint32_t s, const StackDef& x) {
  std::string t = head("stack", s) + F(first_id) + F(parent_id) + F(count) + " ips=[";
  for (uint32_t i = 0; i < x.count; ++i) t += std::to_string(x.ips[i]) + ";";
  return t + "]";
}
std::string to_text(uint32_t s, const Counters& x) {
  return head("counters", s) + F(time) + F(rss_bytes) + F(vm_bytes) + F(heap_live_bytes) + F(heap_blocks);
}
std::string to_text(uint32_t s, const Marker& x) { return head("marker", s) + F(time) + S(label) + F(sampling); }
std::string to_text(uint32_t s, const SampleWeight& x) { return head("sample_weight", s) + F(weight); }
std::string to_text(uint32_t s, const Watermark& x) { return head("watermark", s) + F(time); }
std::string to_text(uint32_t s, const End& x) {
  return head("end", s) + F(time) + " reason=" + std::to_string(static_cast<unsigned>(x.reason)) + F(status) +
         F(allocations) + F(frees) + F(lost_events);
}
std::string to_text(uint32_t s, const Symbols& x) {
  std::string t = head("symbols", s) + F(module_id) + F(count) + " entries=[";
  SymbolIterator it(x);
  for (SymbolEntry e; it.next(e);)
    t += std::to_string(e.offset) + ":" + std::string(e.function) + "@" + std::string(e.file) + ":" +
         std::to_string(e.line) + "/" + std::to_string(e.inline_depth) + ";";
  return t + "]";
}
std::string to_text(uint32_t s, const Scan& x) {
  std::string t = head("scan", s) + " op=" + std::to_string(static_cast<unsigned>(x.op));
  if (x.op == ScanOp::Region)
    return t + F(index) + " kind=" + std::to_string(static_cast<unsigned>(x.kind)) + F(start) + F(end);
  if (x.op == ScanOp::Done) return t + F(regions) + F(words) + F(refs) + F(duration_ns);
  t += F(count) + " refs=[";
  ScanRefIterator it(x);
  for (uint64_t loc, value; it.next(loc, value);) t += std::to_string(loc) + ":" + std::to_string(value) + ";";
  return t + "]";
}
std::string to_text(uint32_t s, const Alloc& x) {
  return head("alloc", s) + F(time) + F(addr) + F(size) + F(stack) + F(weight) + " api=" + std::string(api_name(x.api));
}
std::string to_text(uint32_t s, const Free& x) {
  return head("free", s) + F(time) + F(addr) + F(length) + " api=" + std::string(api_name(x.api));
}
std::string unknown_text(uint32_t s, uint8_t tag, std::span<const uint8_t> p) {
  return head("unknown", s) + " tag=" + std::to_string(tag) +
         " payload=" + hex(std::string_view(reinterpret_cast<const char*>(p.data()), p.size()));
}
#undef F
#undef S

namespace {
// The test process's own directory under the test temp directory, removed with everything in
// it when the process exits.
struct ProcessTempDir {
  std::string path;
  pid_t owner = ::getpid();  // a forked child that exits leaves it alone
  ProcessTempDir() {
    path = testing::TempDir() + "memtide_test_" + std::to_string(owner);
    std::filesystem::create_directories(path);
  }
  ~ProcessTempDir() {
    if (::getpid() != owner) return;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
}  // namespace

std::string temp_path(const std::string& name) {
  static ProcessTempDir dir;
  static std::atomic<unsigned> counter{0};
  return dir.path + "/" + std::to_string(counter++) + "_" + name;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void fix_file_header_checksum(std::vector<uint8_t>& file) {
  wire::store_le<uint32_t>(file.data() + 28, checksum32(file.data(), 28));
}

std::vector<uint64_t> block_offsets(const std::vector<uint8_t>& file) {
  FileReader r;
  std::vector<uint64_t> out;
  if (!r.open_memory(file).ok()) return out;
  BlockRef ref;
  while (r.skip(ref).ok()) out.push_back(ref.offset);
  return out;
}

std::vector<uint8_t> sample_trace(std::vector<std::string>* lines) {
  std::vector<uint8_t> out;
  std::vector<std::string> log;
  TraceWriter w;
  w.open_memory(out);
  auto put = [&](uint32_t s, const auto& rec) {
    w.append(s, rec);
    log.push_back(to_text(s, rec));
  };

  ProcessInfo pi;
  pi.pid = 4242;
  pi.ppid = 1;
  pi.realtime_start_ns = 1700000000123456789ull;
  pi.monotonic_start_ns = 1000;
  pi.page_size = 4096;
  pi.mode = RecordingMode::Sampled;
  pi.sample_interval = 512;
  pi.max_depth = 64;
  pi.counter_interval_ns = 10000000;
  pi.exe = "/usr/bin/demo";
  pi.cwd = "/home/user";
  pi.options = "depth=64\nsample=512";
  const std::string_view argv[] = {"demo", "--size", "a b"};
  w.append(0, pi, argv);
  {
    // The text of a decoded ProcessInfo needs its argv bytes.
    std::vector<uint8_t> av;
    for (auto a : argv) {
      uint8_t tmp[16];
      av.insert(av.end(), tmp, wire::put_varint(tmp, a.size()));
      av.insert(av.end(), a.begin(), a.end());
    }
    ProcessInfo copy = pi;
    copy.argc = 3;
    copy.argv_data = av.data();
    copy.argv_end = av.data() + av.size();
    log.push_back(to_text(0, copy));
  }
  ModuleLoad ml;
  ml.time = 1100;
  ml.module_id = 1;
  ml.load_bias = 0x555555554000ull;
  ml.path = "/usr/bin/demo";
  ml.build_id = std::string_view("\x01\x02\xfe\xff", 4);
  ml.nseg = 2;
  ml.segments[0] = {0, 0x1000, kSegRead};
  ml.segments[1] = {0x1000, 0x2345, kSegRead | kSegExec};
  put(0, ml);
  put(0, ThreadStart{1200, 1, 4243, 0});
  put(0, ThreadName{1210, 1, "worker"});
  w.flush(0);

  const uint64_t ips[] = {0x555555555000ull, 0x555555555100ull, 0x555555554f00ull};
  put(1, StackDef{1, 0, 3, ips});
  put(1, Alloc{1300, 0x7f0000001000ull, 100, 3, 0, Api::Malloc});
  log.push_back(to_text(1, SampleWeight{512}));
  put(1, Alloc{1310, 0x7f0000000800ull, 24, 3, 512, Api::New});
  put(1, Free{1320, 0x7f0000001000ull, 0, Api::Free});
  put(1, Alloc{1330, 0x7f1000000000ull, 1 << 20, 2, 0, Api::Mmap});
  put(1, Free{1340, 0x7f1000000000ull, 1 << 20, Api::Munmap});
  put(1, Marker{1350, "phase 2"});
  put(1, Marker{1360, "memtide: exact recording", 1});  // memtide_sample(0)
  w.flush(1);

  put(0, Counters{1400, 1 << 22, 1 << 24, 1024, 3});
  put(0, Watermark{1500});
  const SymbolEntry syms[] = {{0x1000, "main", "demo.c", 12, 0}, {0x1010, "helper", "demo.h", 3, 1}};
  w.append_symbols(0, 1, syms);
  {
    std::vector<uint8_t> tmp;
    Symbols sy;
    sy.module_id = 1;
    sy.count = 2;
    for (const auto& e : syms) {
      uint8_t b[64];
      uint8_t* q = wire::put_varint(b, e.offset);
      q = wire::put_bytes(q, e.function.data(), e.function.size());
      q = wire::put_bytes(q, e.file.data(), e.file.size());
      q = wire::put_varint(q, e.line);
      q = wire::put_varint(q, e.inline_depth);
      tmp.insert(tmp.end(), b, q);
    }
    sy.data = tmp.data();
    sy.end = tmp.data() + tmp.size();
    log.push_back(to_text(0, sy));
  }
  {
    uint8_t b[128];
    const uint64_t locs[] = {0x7f0000000000ull, 0x7f0000000010ull}, values[] = {0x7f0000000800ull, 0x1000};
    Scan region;
    region.op = ScanOp::Region;
    region.kind = ScanKind::Mapping;
    region.index = 0;
    region.start = 0x7f0000000000ull;
    region.end = 0x7f0000002000ull;
    w.append_record(0, {b, encode_scan_region(b, sizeof b, 0, ScanKind::Mapping, region.start, region.end)});
    log.push_back(to_text(0, region));
    w.append_record(0, {b, encode_scan_refs(b, sizeof b, locs, values, 2)});
    log.push_back(head("scan", 0) + " op=2 count=2 refs=[" + std::to_string(locs[0]) + ":" + std::to_string(values[0]) +
                  ";" + std::to_string(locs[1]) + ":" + std::to_string(values[1]) + ";]");
    Scan done;
    done.op = ScanOp::Done;
    done.regions = 1;
    done.words = 1024;
    done.refs = 2;
    done.duration_ns = 5000;
    w.append_record(0, {b, encode_scan_done(b, sizeof b, 1, 1024, 2, 5000)});
    log.push_back(to_text(0, done));
  }
  put(0, ThreadExit{1600, 1});
  put(0, ModuleUnload{1700, 1});
  put(0, End{1800, EndReason::Exit, 3, 3, 2, 7});
  w.close();
  if (lines) *lines = std::move(log);
  return out;
}

ReadResult decode_all(const std::vector<uint8_t>& file, std::vector<std::string>& lines) {
  FileReader r;
  const OpenResult o = r.open_memory(file);
  if (!o.ok()) return ReadResult::corrupt(0, o.message);
  RecordDecoder dec;
  LogVisitor v;
  ReadResult res = read_records(r, dec, v);
  lines = std::move(v.lines);
  return res;
}

}  // namespace memtide::test
