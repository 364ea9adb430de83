#include "export/speedscope.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

#include "formats/decoder.h"
#include "formats/reader.h"

namespace memtide::exporter {
namespace {

using namespace memtide::analysis;
using nlohmann::json;

// Larger sizes (a hostile file) are clamped, as the replay does.
constexpr uint64_t kMaxBlockBytes = (uint64_t{1} << 56) - 1;

struct Run {
  uint64_t stack = 0, bytes = 0;
};

// Each stream's heap allocations in the model's window, in the stream's (time) order, runs of
// one stack merged.
struct AllocCollector : fmt::NullVisitor {
  uint64_t from = 0, to = UINT64_MAX;
  std::map<uint32_t, std::vector<Run>> streams;

  void on_alloc(uint32_t stream, const fmt::Alloc& a) {
    if (static_cast<unsigned>(a.api) >= fmt::kApiCount || domain_of(a.api) != Domain::Heap) return;
    if (a.time < from || a.time > to) return;
    const uint64_t size = std::min(a.size, kMaxBlockBytes);
    const uint64_t bytes = a.weight ? std::min(std::max(a.weight, size), kMaxBlockBytes) : size;
    std::vector<Run>& runs = streams[stream];
    if (!runs.empty() && runs.back().stack == a.stack)
      runs.back().bytes += bytes;
    else
      runs.push_back({a.stack, bytes});
  }
};

// speedscope's frames, one per function and file (its own importers key frames the same way),
// and each stack as their indices, outermost caller first.
class Frames {
 public:
  Frames(const Model& m, Symbolizer& s) : m_(m), sym_(s) {}

  // The stack's JSON array ("[0,4,7]"), made once per stack: a long trace repeats its stacks
  // millions of times.
  const std::string& stack(uint64_t id) {
    auto [it, fresh] = stacks_.try_emplace(id);
    if (!fresh) return it->second;
    ips_.clear();
    m_.stack_table.frames(StackId(id), ips_);
    std::string& text = it->second;
    text = "[";
    for (uint64_t ip : ips_)
      for (const Frame& f : sym_.resolve(ip)) text += (text.size() > 1 ? "," : "") + std::to_string(frame(f));
    text += ']';
    return text;
  }
  json& frames() { return frames_; }

 private:
  uint32_t frame(const Frame& f) {
    const std::string name = f.function.empty() ? frame_label(f) : std::string(f.function);
    auto [it, fresh] = index_.try_emplace(name + '\0' + std::string(f.file), static_cast<uint32_t>(frames_.size()));
    if (fresh) {
      json j = {{"name", name}};
      if (!f.file.empty()) j["file"] = std::string(f.file);
      frames_.push_back(std::move(j));
    }
    return it->second;
  }

  const Model& m_;
  Symbolizer& sym_;
  json frames_ = json::array();
  std::unordered_map<std::string, uint32_t> index_;
  std::unordered_map<uint64_t, std::string> stacks_;
  std::vector<uint64_t> ips_;
};

std::string thread_name(const Model& m, uint32_t stream) {
  for (const ThreadInfo& t : m.threads)
    if (t.id.value == stream) {
      std::string s = "thread " + std::to_string(stream);
      if (t.os_tid) s += " (tid " + std::to_string(t.os_tid) + (t.name.empty() ? "" : ", " + t.name) + ")";
      return s;
    }
  return stream == 0 ? "process" : "thread " + std::to_string(stream);
}

}  // namespace

std::string write_speedscope(const std::string& path, const Model& m, Symbolizer& symbols,
                             const SpeedscopeOptions& o, std::ostream& out) {
  fmt::FileReader reader;
  if (const fmt::OpenResult r = reader.open(path); !r.ok()) return r.message;
  AllocCollector c;
  c.from = m.window_from;
  c.to = m.window_to;
  fmt::RecordDecoder decoder;
  // A cut or damaged tail was reported by the replay already; what was read is exported.
  (void)fmt::read_records(reader, decoder, c);

  // Written as it is made: a long trace has millions of samples, which a JSON document in
  // memory would hold at several times their size. Strings go through nlohmann's escaping.
  auto quoted = [](const std::string& v) { return json(v).dump(-1, ' ', false, json::error_handler_t::replace); };
  Frames frames(m, symbols);
  std::size_t active = 0;
  uint64_t most = 0;
  out << "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"profiles\":[";
  std::size_t index = 0;
  for (const auto& [stream, runs] : c.streams) {
    uint64_t total = 0;
    for (const Run& r : runs) total += r.bytes;
    if (total > most || index == 0) most = total, active = index;
    out << (index++ ? "," : "") << "{\"type\":\"sampled\",\"name\":" << quoted(thread_name(m, stream))
        << ",\"unit\":\"bytes\",\"startValue\":0,\"endValue\":" << total << ",\"samples\":[";
    for (std::size_t i = 0; i < runs.size(); ++i) out << (i ? "," : "") << frames.stack(runs[i].stack);
    out << "],\"weights\":[";
    for (std::size_t i = 0; i < runs.size(); ++i) out << (i ? "," : "") << runs[i].bytes;
    out << "]}";
  }
  out << "],\"shared\":{\"frames\":" << frames.frames().dump(-1, ' ', false, json::error_handler_t::replace)
      << "},\"name\":" << quoted("allocations of " + (m.process.exe.empty() ? path : program_label(m.process)))
      << ",\"activeProfileIndex\":" << active << ",\"exporter\":" << quoted(o.exporter) << "}\n";
  return {};
}

}  // namespace memtide::exporter
