// Writes the seed corpus of the reader fuzzer (committed under tests/corpus/):
//   memtide-gen-corpus DIR
// Small valid traces (every record type, several streams, watermarks, sampled, unknown
// records) and broken ones (truncated, flipped bytes, garbage, empty, future version, hostile
// counts with valid checksums). Deterministic: same bytes on every run.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "formats/encoder.h"
#include "formats/writer.h"

namespace {

using namespace memtide::fmt;
using Bytes = std::vector<uint8_t>;

std::string g_dir;

void save(const char* name, const Bytes& b) {
  const std::string path = g_dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (b.size() && std::fwrite(b.data(), 1, b.size(), f) != b.size())) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

// Every record type, three streams; small blocks so that most are stored uncompressed (the
// fuzzer then mutates record bytes directly).
Bytes full_trace(std::size_t block_bytes, bool sampled, int events = 24, int wm_every = 8) {
  Bytes out;
  TraceWriter w;
  TraceWriter::Options o;
  o.block_bytes = block_bytes;
  o.file_flags = sampled ? kFileFlagSampled : 0;
  w.open_memory(out, o);
  ProcessInfo pi;
  pi.pid = 100;
  pi.ppid = 1;
  pi.realtime_start_ns = 1700000000000000000ull;
  pi.monotonic_start_ns = 50;
  pi.page_size = 4096;
  pi.mode = sampled ? RecordingMode::Sampled : RecordingMode::Exact;
  pi.sample_interval = sampled ? 4096 : 0;
  pi.max_depth = 32;
  pi.exe = "/bin/app";
  pi.cwd = "/";
  pi.options = "depth=32";
  const std::string_view argv[] = {"app", "-x"};
  w.append(0, pi, argv);
  ModuleLoad ml;
  ml.time = 60;
  ml.module_id = 1;
  ml.load_bias = 0x400000;
  ml.path = "/bin/app";
  ml.build_id = "\x12\x34";
  ml.nseg = 2;
  ml.segments[0] = {0, 0x1000, kSegRead};
  ml.segments[1] = {0x1000, 0x800, kSegRead | kSegExec};
  w.append(0, ml);
  w.append(0, ThreadStart{70, 1, 101, 0});
  w.append(0, ThreadName{71, 1, "main"});
  w.append(0, ThreadStart{72, 2, 102, 1});
  w.flush(0);
  const uint64_t ips[] = {0x401000, 0x401200, 0x401100};
  w.append(1, StackDef{1, 0, 3, ips});
  w.append(2, StackDef{4, 2, 1, ips});
  uint64_t t = 100;
  for (int i = 0; i < events; ++i) {
    const uint32_t s = 1 + i % 2;
    const uint64_t addr = 0x10000 + static_cast<uint64_t>(i % 5) * 0x40;
    w.append(s, Alloc{t, addr, 16u + static_cast<uint64_t>(i), 1u + i % 4, sampled && i % 3 == 0 ? 4096u : 0u,
                      i % 4 == 0 ? Api::New : Api::Malloc});
    w.append(s, Free{t + 1, addr, 0, i % 4 == 0 ? Api::Delete : Api::Free});
    t += 3;
    if (i % wm_every == wm_every - 1) w.watermark(t);
  }
  w.append(1, Alloc{t, 0x7f0000000000, 8192, 2, 0, Api::Mmap});
  w.append(1, Free{t + 1, 0x7f0000000000, 8192, Api::Munmap});
  w.append(1, Marker{t + 2, "phase"});
  w.append(0, Counters{t + 3, 1 << 20, 1 << 22, 4096, 3});
  w.append(2, ThreadExit{t + 4, 2});
  w.append(0, ModuleUnload{t + 5, 1});
  const SymbolEntry syms[] = {{0x1000, "main", "app.c", 10, 0}, {0x1200, "f", "app.c", 20, 1}};
  w.append_symbols(0, 1, syms);
  w.end(End{t + 6, EndReason::Exit, 0, static_cast<uint64_t>(events) + 1, static_cast<uint64_t>(events) + 1, 0});
  w.close();
  return out;
}

Bytes header(uint16_t major, uint16_t minor) {
  Bytes h(kFileHeaderSize);
  encode_file_header(h.data(), 0);
  h[8] = static_cast<uint8_t>(major);
  h[9] = static_cast<uint8_t>(major >> 8);
  h[10] = static_cast<uint8_t>(minor);
  h[11] = static_cast<uint8_t>(minor >> 8);
  const uint32_t c = checksum32(h.data(), 28);
  for (int i = 0; i < 4; ++i) h[28 + i] = static_cast<uint8_t>(c >> (8 * i));
  return h;
}

// A file holding one block with `raw` as payload (checksums valid).
Bytes one_block(const Bytes& raw, uint32_t stream = 1) {
  Bytes out = header(kVersionMajor, kVersionMinor);
  BlockHeader h;
  h.stream = stream;
  Bytes b(block_bound(raw.size()));
  b.resize(encode_block(h, raw.data(), raw.size(), b.data(), b.size()));
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

void put_varint(Bytes& b, uint64_t v) {
  uint8_t tmp[memtide::wire::kMaxVarint];
  b.insert(b.end(), tmp, memtide::wire::put_varint(tmp, v));
}

Bytes prefixed(uint8_t tag, const Bytes& body) {
  Bytes r{tag};
  put_varint(r, body.size());
  r.insert(r.end(), body.begin(), body.end());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];

  const Bytes small = full_trace(256, false);
  save("valid-small-blocks", small);
  save("valid-sampled", full_trace(256, true));
  save("valid-lz4", full_trace(64 << 10, false, 300, 1000));
  save("header-only", header(kVersionMajor, kVersionMinor));
  save("empty", {});
  save("future-major", [&] {
    Bytes b = small;
    Bytes h = header(kVersionMajor + 1, 0);
    std::copy(h.begin(), h.end(), b.begin());
    return b;
  }());
  save("newer-minor", [&] {
    Bytes b = small;
    Bytes h = header(kVersionMajor, kVersionMinor + 1);
    std::copy(h.begin(), h.end(), b.begin());
    return b;
  }());
  save("truncated-header", Bytes(small.begin(), small.begin() + 20));
  save("truncated-block-header", Bytes(small.begin(), small.begin() + kFileHeaderSize + 20));
  save("truncated-payload", Bytes(small.begin(), small.end() - 3));
  save("flipped-block-header", [&] {
    Bytes b = small;
    b[kFileHeaderSize + 9] ^= 0x40;
    return b;
  }());
  save("flipped-payload", [&] {
    Bytes b = small;
    b[kFileHeaderSize + kBlockHeaderSize + 5] ^= 0x01;
    return b;
  }());
  save("garbage", [] {
    std::mt19937 rng(1);
    Bytes b(256);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
  }());
  save("garbage-after-header", [] {
    std::mt19937 rng(2);
    Bytes b = header(kVersionMajor, kVersionMinor);
    for (int i = 0; i < 200; ++i) b.push_back(static_cast<uint8_t>(rng()));
    return b;
  }());
  // Hostile records behind valid checksums.
  save("unknown-records", [] {
    Bytes raw = prefixed(0x30, {1, 2, 3});
    Bytes more = prefixed(0xE0, {});
    raw.insert(raw.end(), more.begin(), more.end());
    uint8_t a[kMaxAllocRecord];
    raw.insert(raw.end(), a, encode_alloc(a, Api::Malloc, 1, 0x100, 8, 1));
    return one_block(raw);
  }());
  save("stackdef-too-many-frames", [] {
    Bytes body;
    put_varint(body, 1);
    put_varint(body, 0);
    put_varint(body, kMaxStackDefFrames + 1);
    body.resize(body.size() + 64, 2);
    return one_block(prefixed(0x07, body));
  }());
  save("module-too-many-segments", [] {
    Bytes body;
    put_varint(body, 1);
    put_varint(body, 1);
    put_varint(body, 0);
    body.push_back(0);
    body.push_back(0);
    put_varint(body, kMaxSegments + 1);
    return one_block(prefixed(0x02, body));
  }());
  save("record-length-past-block", one_block({0x09, 0x7f, 0x01}));
  save("alloc-cut-short", one_block({0x40, 0x01, 0x80}));
  save("process-huge-argc", [] {
    Bytes body;
    for (int i = 0; i < 5; ++i) put_varint(body, 1);
    body.push_back(0);
    for (int i = 0; i < 3; ++i) put_varint(body, 0);
    body.push_back(0);
    body.push_back(0);
    put_varint(body, UINT64_MAX);
    return one_block(prefixed(0x01, body), 0);
  }());
  save("weights-without-alloc", [] {
    Bytes raw = prefixed(0x0A, {0x80, 0x20});
    uint8_t f[kMaxFreeRecord];
    raw.insert(raw.end(), f, encode_free(f, Api::Free, 1, 1, 0));
    return one_block(raw);
  }());
  return 0;
}
