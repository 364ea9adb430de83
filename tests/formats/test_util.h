// Helpers shared by the format and CLI tests: record formatting with every field (so that a
// round trip can be compared as text), file helpers, and small ready-made traces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/decoder.h"
#include "formats/records.h"
#include "formats/writer.h"

namespace memtide::test {

// One line per record, every field included.
std::string to_text(uint32_t s, const fmt::ProcessInfo& x);
std::string to_text(uint32_t s, const fmt::ModuleLoad& x);
std::string to_text(uint32_t s, const fmt::ModuleUnload& x);
std::string to_text(uint32_t s, const fmt::ThreadStart& x);
std::string to_text(uint32_t s, const fmt::ThreadName& x);
std::string to_text(uint32_t s, const fmt::ThreadExit& x);
std::string to_text(uint32_t s, const fmt::StackDef& x);
std::string to_text(uint32_t s, const fmt::Counters& x);
std::string to_text(uint32_t s, const fmt::Marker& x);
std::string to_text(uint32_t s, const fmt::SampleWeight& x);
std::string to_text(uint32_t s, const fmt::Watermark& x);
std::string to_text(uint32_t s, const fmt::End& x);
std::string to_text(uint32_t s, const fmt::Symbols& x);
std::string to_text(uint32_t s, const fmt::Scan& x);
std::string to_text(uint32_t s, const fmt::Alloc& x);
std::string to_text(uint32_t s, const fmt::Free& x);
std::string unknown_text(uint32_t s, uint8_t tag, std::span<const uint8_t> payload);

// Template visitor logging every record as text (the fast path).
struct LogVisitor : fmt::NullVisitor {
  std::vector<std::string> lines;
  void on_process_info(uint32_t s, const fmt::ProcessInfo& x) { lines.push_back(to_text(s, x)); }
  void on_module_load(uint32_t s, const fmt::ModuleLoad& x) { lines.push_back(to_text(s, x)); }
  void on_module_unload(uint32_t s, const fmt::ModuleUnload& x) { lines.push_back(to_text(s, x)); }
  void on_thread_start(uint32_t s, const fmt::ThreadStart& x) { lines.push_back(to_text(s, x)); }
  void on_thread_name(uint32_t s, const fmt::ThreadName& x) { lines.push_back(to_text(s, x)); }
  void on_thread_exit(uint32_t s, const fmt::ThreadExit& x) { lines.push_back(to_text(s, x)); }
  void on_stack_def(uint32_t s, const fmt::StackDef& x) { lines.push_back(to_text(s, x)); }
  void on_counters(uint32_t s, const fmt::Counters& x) { lines.push_back(to_text(s, x)); }
  void on_marker(uint32_t s, const fmt::Marker& x) { lines.push_back(to_text(s, x)); }
  void on_sample_weight(uint32_t s, const fmt::SampleWeight& x) { lines.push_back(to_text(s, x)); }
  void on_watermark(uint32_t s, const fmt::Watermark& x) { lines.push_back(to_text(s, x)); }
  void on_end(uint32_t s, const fmt::End& x) { lines.push_back(to_text(s, x)); }
  void on_symbols(uint32_t s, const fmt::Symbols& x) { lines.push_back(to_text(s, x)); }
  void on_scan(uint32_t s, const fmt::Scan& x) { lines.push_back(to_text(s, x)); }
  void on_alloc(uint32_t s, const fmt::Alloc& x) { lines.push_back(to_text(s, x)); }
  void on_free(uint32_t s, const fmt::Free& x) { lines.push_back(to_text(s, x)); }
  void on_unknown(uint32_t s, uint8_t tag, std::span<const uint8_t> p) { lines.push_back(unknown_text(s, tag, p)); }
};

// The same through the virtual interface.
struct VirtualLogVisitor : fmt::RecordVisitor {
  LogVisitor log;
  void on_process_info(uint32_t s, const fmt::ProcessInfo& x) override { log.on_process_info(s, x); }
  void on_module_load(uint32_t s, const fmt::ModuleLoad& x) override { log.on_module_load(s, x); }
  void on_module_unload(uint32_t s, const fmt::ModuleUnload& x) override { log.on_module_unload(s, x); }
  void on_thread_start(uint32_t s, const fmt::ThreadStart& x) override { log.on_thread_start(s, x); }
  void on_thread_name(uint32_t s, const fmt::ThreadName& x) override { log.on_thread_name(s, x); }
  void on_thread_exit(uint32_t s, const fmt::ThreadExit& x) override { log.on_thread_exit(s, x); }
  void on_stack_def(uint32_t s, const fmt::StackDef& x) override { log.on_stack_def(s, x); }
  void on_counters(uint32_t s, const fmt::Counters& x) override { log.on_counters(s, x); }
  void on_marker(uint32_t s, const fmt::Marker& x) override { log.on_marker(s, x); }
  void on_sample_weight(uint32_t s, const fmt::SampleWeight& x) override { log.on_sample_weight(s, x); }
  void on_watermark(uint32_t s, const fmt::Watermark& x) override { log.on_watermark(s, x); }
  void on_end(uint32_t s, const fmt::End& x) override { log.on_end(s, x); }
  void on_symbols(uint32_t s, const fmt::Symbols& x) override { log.on_symbols(s, x); }
  void on_scan(uint32_t s, const fmt::Scan& x) override { log.on_scan(s, x); }
  void on_alloc(uint32_t s, const fmt::Alloc& x) override { log.on_alloc(s, x); }
  void on_free(uint32_t s, const fmt::Free& x) override { log.on_free(s, x); }
  void on_unknown(uint32_t s, uint8_t tag, std::span<const uint8_t> p) override { log.on_unknown(s, tag, p); }
};

// A fresh path in the test process's temp directory (not created), which is removed with its
// contents when the process exits.
std::string temp_path(const std::string& name);
std::vector<uint8_t> read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

// Recomputes the file header checksum after a test edited the header.
void fix_file_header_checksum(std::vector<uint8_t>& file);
// Offsets of every block of a well-formed trace image.
std::vector<uint64_t> block_offsets(const std::vector<uint8_t>& file);

// A small trace with every record type, in several streams and blocks. `lines` receives the
// text of what was written, in file order (what a file-order decode must produce).
std::vector<uint8_t> sample_trace(std::vector<std::string>* lines = nullptr);

// Decodes a whole trace image in file order; returns the final status.
fmt::ReadResult decode_all(const std::vector<uint8_t>& file, std::vector<std::string>& lines);

}  // namespace memtide::test
