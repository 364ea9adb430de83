#include "export/pprof.h"

#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "profile.pb.h"

namespace memtide::exporter {
namespace {

using namespace memtide::analysis;
namespace pb = perftools::profiles;

// Ids of the profile's strings, functions, mappings and locations, each made once.
class Builder {
 public:
  Builder(const Model& m, Symbolizer& s, pb::Profile& p) : m_(m), sym_(s), p_(p) {
    str("");
    // pprof takes the first mapping for the program's own.
    for (const ModuleInfo& mod : m.modules)
      if (!m.process.exe.empty() && mod.path == m.process.exe) {
        mapping(mod);
        break;
      }
  }

  int64_t str(std::string_view s) {
    auto [it, fresh] = strings_.try_emplace(std::string(s), static_cast<int64_t>(strings_.size()));
    if (fresh) p_.add_string_table(it->first);
    return it->second;
  }

  // One location per return address: its address is the call instruction's (ip - 1, where
  // the symbols were looked up), its lines the inlined functions innermost first, as
  // profile.proto orders them.
  uint64_t location(uint64_t ip) {
    auto [it, fresh] = locations_.try_emplace(ip, locations_.size() + 1);
    if (!fresh) return it->second;
    pb::Location* loc = p_.add_location();
    loc->set_id(it->second);
    loc->set_address(ip ? ip - 1 : 0);
    if (const ModuleInfo* mod = m_.module_at(ip)) loc->set_mapping_id(mapping(*mod));
    const std::span<const Frame> frames = sym_.resolve(ip);
    for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
      pb::Line* line = loc->add_line();
      line->set_function_id(function(*f));
      line->set_line(f->line);
    }
    return it->second;
  }

 private:
  uint64_t function(const Frame& f) {
    const std::string name = f.function.empty() ? frame_label(f) : std::string(f.function);
    auto [it, fresh] = functions_.try_emplace(name + '\0' + std::string(f.file), functions_.size() + 1);
    if (fresh) {
      pb::Function* fn = p_.add_function();
      fn->set_id(it->second);
      fn->set_name(str(name));
      fn->set_system_name(str(name));
      fn->set_filename(str(f.file));
    }
    return it->second;
  }

  // A module's executable segments. file_offset is their first virtual address, which is
  // the file offset in the usual ELF layout (p_offset == p_vaddr); the trace does not record
  // the segments' offsets. The names are given, so no reader needs the file.
  uint64_t mapping(const ModuleInfo& mod) {
    const auto index = static_cast<std::size_t>(&mod - m_.modules.data());
    auto [it, fresh] = mappings_.try_emplace(index, mappings_.size() + 1);
    if (fresh) {
      pb::Mapping* mp = p_.add_mapping();
      mp->set_id(it->second);
      mp->set_memory_start(mod.lo);
      mp->set_memory_limit(mod.hi);
      mp->set_file_offset(mod.lo >= mod.load_bias ? mod.lo - mod.load_bias : 0);
      mp->set_filename(str(mod.path));
      mp->set_build_id(str(hex_bytes(mod.build_id)));
      mp->set_has_functions(true);
      mp->set_has_filenames(true);
      mp->set_has_line_numbers(true);
      mp->set_has_inline_frames(true);
    }
    return it->second;
  }

  const Model& m_;
  Symbolizer& sym_;
  pb::Profile& p_;
  std::unordered_map<std::string, int64_t> strings_;
  std::unordered_map<std::string, uint64_t> functions_;
  std::unordered_map<std::size_t, uint64_t> mappings_;
  std::unordered_map<uint64_t, uint64_t> locations_;
};

int64_t as_value(uint64_t v) { return v > INT64_MAX ? INT64_MAX : static_cast<int64_t>(v); }

}  // namespace

std::string pprof_profile(const Model& m, Symbolizer& symbols, const PprofOptions& o) {
  pb::Profile p;
  Builder b(m, symbols, p);
  for (const auto& [type, unit] : {std::pair{"alloc_objects", "count"}, {"alloc_space", "bytes"},
                                   {"inuse_objects", "count"}, {"inuse_space", "bytes"}}) {
    pb::ValueType* vt = p.add_sample_type();
    vt->set_type(b.str(type));
    vt->set_unit(b.str(unit));
  }
  p.mutable_period_type()->set_type(b.str("space"));
  p.mutable_period_type()->set_unit(b.str("bytes"));
  p.set_period(m.sampling.sampled() ? as_value(m.sampling.interval()) : 1);
  p.set_time_nanos(as_value(m.process.realtime_start_ns));
  p.set_duration_nanos(as_value(m.duration()));

  std::vector<std::string> comments;
  comments.push_back("memtide heap profile of " + (m.process.exe.empty() ? o.source : program_label(m.process)) +
                     (o.source.empty() ? "" : " (" + o.source + ")"));
  if (m.has_window()) comments.push_back("allocations made in a window of the trace only");
  comments.push_back(o.inuse_at ? "inuse: blocks live at the chosen time" : "inuse: blocks live at the end of the trace");
  if (m.sampling.sampled())
    comments.push_back("sampled recording: values are estimates (one sample per " +
                       std::to_string(m.sampling.interval()) + " bytes on average)");
  for (const std::string& c : comments) p.add_comment(b.str(c));

  std::vector<uint64_t> ips;
  for (const StackStats& s : m.stacks[static_cast<unsigned>(Domain::Heap)]) {
    const uint64_t inuse_objects = o.inuse_at ? s.m.at_blocks : s.m.leaked_blocks;
    const uint64_t inuse_space = o.inuse_at ? s.m.at_bytes : s.m.leaked_bytes;
    if (s.m.alloc_count == 0 && s.m.alloc_bytes == 0 && inuse_objects == 0 && inuse_space == 0) continue;
    pb::Sample* sample = p.add_sample();
    ips.clear();
    m.stack_table.frames(s.stack, ips);
    for (auto ip = ips.rbegin(); ip != ips.rend(); ++ip) sample->add_location_id(b.location(*ip));
    for (uint64_t v : {s.m.alloc_count, s.m.alloc_bytes, inuse_objects, inuse_space}) sample->add_value(as_value(v));
  }

  std::string out;
  {
    google::protobuf::io::StringOutputStream sink(&out);
    google::protobuf::io::GzipOutputStream::Options go;
    go.format = google::protobuf::io::GzipOutputStream::GZIP;
    google::protobuf::io::GzipOutputStream gz(&sink, go);
    if (!p.SerializeToZeroCopyStream(&gz) || !gz.Close()) {
      const char* why = gz.ZlibErrorMessage();
      throw std::runtime_error(std::string("cannot encode the profile: ") + (why ? why : "zlib failed"));
    }
  }
  return out;
}

}  // namespace memtide::exporter
