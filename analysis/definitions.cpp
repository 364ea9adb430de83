#include "analysis/definitions.h"

#include <utility>

#include "formats/decoder.h"
#include "formats/reader.h"

namespace memtide::analysis {

using namespace memtide::fmt;

namespace {

// The modules, stacks, symbols and End; everything else is decoded (to find where the next
// record starts) and dropped.
class DefinitionVisitor : public NullVisitor {
 public:
  DefinitionVisitor(Model& m, std::vector<uint64_t>& new_ips) : m_(m), new_ips_(new_ips) {}
  void on_module_load(uint32_t, const ModuleLoad& x) { m_.modules.push_back(module_info(x)); }
  void on_module_unload(uint32_t, const ModuleUnload& x) { unload_module(m_, x); }
  void on_stack_def(uint32_t, const StackDef& x) {
    m_.stack_table.define(x.first_id, x.parent_id, x.ips, x.count);
    new_ips_.insert(new_ips_.end(), x.ips, x.ips + x.count);
  }
  void on_symbols(uint32_t, const Symbols& x) { add_embedded(m_, x); }
  void on_end(uint32_t, const End& x) {
    m_.complete = true;
    m_.end = x;
  }

 private:
  Model& m_;
  std::vector<uint64_t>& new_ips_;
};

// Blocks that may hold what a reader after `wanted` block flags needs: all of them without
// hints, else the process stream's and the flagged ones.
bool wanted_block(const BlockHeader& h, bool hints, uint16_t wanted, bool process_stream) {
  if (!hints) return true;
  return (h.flags & wanted) != 0 || (process_stream && h.stream == 0);
}

}  // namespace

struct DefinitionReader::Impl {
  FileReader reader;
  RecordDecoder decoder;
  Model model;
  std::vector<uint64_t> new_ips;
  DefinitionVisitor visitor{model, new_ips};
  bool hints = false;
  bool stopped = false;  // an I/O error
  bool tail_truncated = false;
  uint64_t last_corrupt = UINT64_MAX;  // offset of the last bad block warned about
};

DefinitionReader::DefinitionReader() : p_(std::make_unique<Impl>()) {}
DefinitionReader::~DefinitionReader() = default;

std::string DefinitionReader::open(const std::string& path) {
  p_ = std::make_unique<Impl>();  // (again: a reader of a set that fell behind starts over)
  if (OpenResult o = p_->reader.open(path); !o.ok()) return o.message;
  p_->hints = (p_->reader.info().flags & kFileFlagBlockHints) != 0;
  for (const std::string& w : p_->reader.warnings()) p_->model.warnings.push_back(w);
  return {};
}

DefinitionReader::Progress DefinitionReader::advance() {
  Progress out;
  Impl& p = *p_;
  if (p.stopped) return out;
  p.tail_truncated = false;
  for (;;) {
    // Step over the block by its header; go back and read it whole if it is wanted.
    BlockRef ref;
    ReadResult r = p.reader.skip(ref);
    if (r.ok()) {
      if (!wanted_block(ref.header, p.hints, kBlockFlagStacks | kBlockFlagSymbols, true)) {
        ++out.blocks_skipped;
        continue;
      }
      p.reader.seek(ref.offset);
      Block b;
      r = p.reader.next(b);
      if (r.ok()) {
        ++out.blocks_read;
        if (ReadResult d = p.decoder.decode(b, p.visitor); !d.ok()) {
          p.model.corrupt = true;
          p.model.warnings.push_back(d.message + "; the rest of that block was skipped");
        }
        continue;
      }
    }
    if (r.end_of_file()) return out;
    if (r.status == ReadStatus::Truncated) {
      p.tail_truncated = true;
      out.waiting = true;
      return out;
    }
    if (r.status == ReadStatus::Corrupt) {
      p.model.corrupt = true;
      // A follower meets the same bad block at every call until something follows it.
      if (r.offset != p.last_corrupt) p.model.warnings.push_back(r.message + "; skipped");
      p.last_corrupt = r.offset;
      if (p.reader.resync()) continue;
      p.tail_truncated = true;  // nothing readable after it
      return out;
    }
    p.stopped = true;  // I/O error
    p.model.warnings.push_back(r.message);
    return out;
  }
}

void DefinitionReader::finish() {
  if (p_->tail_truncated) {
    p_->model.truncated = true;
    p_->model.warnings.push_back("the trace ends inside a block (truncated at offset " +
                                 std::to_string(p_->reader.offset()) + ")");
  }
  sort_embedded(p_->model);
}

const Model& DefinitionReader::model() const { return p_->model; }
std::vector<uint64_t> DefinitionReader::take_new_ips() { return std::exchange(p_->new_ips, {}); }
uint64_t DefinitionReader::offset() const { return p_->reader.offset(); }
bool DefinitionReader::writer_alive() const { return p_->reader.writer_alive(); }
bool DefinitionReader::fell_behind() const { return p_->reader.fell_behind(); }
bool DefinitionReader::has_hints() const { return p_->hints; }

std::set<uint64_t> embedded_symbol_modules(const std::string& path) {
  std::set<uint64_t> out;
  FileReader reader;
  if (!reader.open(path).ok() || !(reader.info().flags & kFileFlagBlockHints)) return out;
  struct Visitor : NullVisitor {
    std::set<uint64_t>* ids;
    void on_symbols(uint32_t, const Symbols& x) {
      if (x.count) ids->insert(x.module_id);
    }
  } v;
  v.ids = &out;
  RecordDecoder decoder;
  for (;;) {
    BlockRef ref;
    if (!reader.skip(ref).ok()) break;
    if (!wanted_block(ref.header, true, kBlockFlagSymbols, false)) continue;
    reader.seek(ref.offset);
    Block b;
    if (!reader.next(b).ok()) break;
    (void)decoder.decode(b, v);
  }
  return out;
}

}  // namespace memtide::analysis
