// Leak suppressions in LeakSanitizer's format, for `memtide check`, `memtide report` and the
// viewer's Leaks view:
//
//   # comment
//   leak:<pattern>
//
// A pattern matches a stack when it matches the function, the source file or the module path
// of any of its frames. As in LSan, `*` matches any run of characters, a leading `^` / trailing
// `$` anchors the pattern (otherwise it may match anywhere in the string). Other suppression
// types of the sanitizers (race:, called_from_lib:, ...) are accepted and ignored with a note.
//
// Built-in suppressions cover one-time allocations of glibc and libstdc++ that are never freed
// by design (docs/REPORT_JSON.md lists them); `memtide check --no-builtin-suppressions` drops them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "analysis/model.h"
#include "analysis/symbols.h"

namespace memtide::analysis {

struct Suppression {
  std::string pattern;      // as written after "leak:"
  std::string origin;       // "FILE:LINE", or "built-in"
  std::string description;  // built-in ones: why
  bool builtin = false;
  // Built-in ones may also require the allocation site (the stack's last frame) to be in a
  // module matching this glob, so that e.g. "_dl_init" hides libstdc++'s own start-up
  // allocations but not those of the program's shared libraries.
  std::string site_module;
  // What it hid (filled by the caller as it applies them).
  uint64_t stacks = 0, blocks = 0, bytes = 0;
};

// LSan's template match (see above).
bool glob_match(std::string_view pattern, std::string_view text);

class SuppressionList {
 public:
  // Parses a suppressions file. False with `error` ("FILE:3: unknown line ...") on a bad line;
  // `notes` collects ignored entries of other types.
  bool parse(std::string_view text, const std::string& origin, std::string& error, std::vector<std::string>& notes);
  bool load_file(const std::string& path, std::string& error, std::vector<std::string>& notes);
  void add_builtin();

  // The first suppression matching any frame of `frames` (outermost first, allocation site
  // last, as Symbolizer::stack gives them), or -1.
  int match(const std::vector<Frame>& frames) const;

  std::vector<Suppression>& items() { return items_; }
  const std::vector<Suppression>& items() const { return items_; }

 private:
  std::vector<Suppression> items_;
};

// A reader's suppressions (`memtide check`, `memtide report --suppressions`, the viewer's): the
// files in order, then the built-in ones unless `builtin` is false. False with `error` at the
// first file that cannot be read or holds a bad line.
bool load_suppressions(SuppressionList& supp, const std::vector<std::string>& files, bool builtin, std::string& error,
                       std::vector<std::string>& notes);

// How widely each function spreads over a program's allocations, to tell the frame that
// identifies a leak from a wrapper. A suppression is made for one leak; a line that names an
// allocation wrapper (redis's zmalloc, a project's xmalloc, a pool's alloc) or a general-purpose
// constructor (a string's) matches much of what the program allocates, and would hide every
// leak that comes later. Two signs of one: the share of the program's allocations whose stack
// holds the function, and the number of distinct functions that call it where it allocates.
// The stacks with the most allocations are read, up to `max_stacks` (each symbolised once).
class FunctionSpread {
 public:
  FunctionSpread() = default;
  FunctionSpread(const Model& m, Symbolizer& sym, Domain domain = Domain::Heap, std::size_t max_stacks = 20000);

  // Share (0..1) of the domain's counted allocations whose stack holds `function`.
  double share(std::string_view function) const;
  // The same for a frame: its function's share, or for a frame without a name (a suppression
  // then names its module), its module's.
  double share(const Frame& f) const;
  // Distinct functions seen calling `function` in the stacks read (counted up to kManyCallers).
  std::size_t callers(std::string_view function) const;

  // More than half of the allocations, or called from kManyCallers places: not one leak's.
  static constexpr double kWidespread = 0.5;
  static constexpr std::size_t kManyCallers = 8;
  bool widespread(std::string_view function) const {
    return share(function) > kWidespread || callers(function) >= kManyCallers;
  }
  // The same for a frame; one without a name by its module's share.
  bool widespread(const Frame& f) const {
    return f.function.empty() ? share(f) > kWidespread : widespread(f.function);
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Use {
    uint64_t allocations = 0;
    std::vector<std::string> callers;  // at most kManyCallers
  };
  std::unordered_map<std::string, Use, Hash, std::equal_to<>> functions_;
  std::unordered_map<std::string, uint64_t, Hash, std::equal_to<>> by_module_;
  uint64_t total_ = 0;
};

// A frame as the suggestion sees it: its function (empty when unknown), its module's path,
// and whether FunctionSpread finds it widespread.
struct SuggestionFrame {
  std::string_view function, module;
  bool widespread = false;
};

// Whether a frame belongs to the allocator, the C and C++ runtimes or the standard library
// (no suppression should name those).
bool is_library_frame(std::string_view function, std::string_view module);

// The frame a suppression should name (frames from the allocation site outwards): the first
// that belongs to the program, is not widespread and is not named as an allocation function
// (its name holds "alloc": xmalloc, zcalloc, pool_alloc); when every program frame is one of
// those, the first program frame; else the first with a function.
std::size_t suggested_frame(const std::vector<SuggestionFrame>& frames);

// "leak:<pattern>" naming frame `frame`: its function, or for a frame without one its module's
// file name; characters LSan's patterns give a meaning to (`*`, `^`, `$`) become '*'.
std::string suppression_line(std::string_view function, std::string_view module);

// The suggested suppression of a stack (frames from the allocation site outwards).
std::string suggest_suppression(const std::vector<Frame>& leaf_first, const FunctionSpread& spread);

// The suggested suppressions of the leaking stacks `stacks` (each from the allocation site
// outwards), one line each, none hiding more than it must: suggest_suppression's line when it
// matches no other of the stacks; else, of the stack's frames, the one whose line matches the
// fewest others (the nearest to the allocation site among those). `(*others)[i]`: how many of
// the other stacks line i still matches (a stdio buffer's stack named by `main` would hide
// every leak of the program). Only the first `count` stacks get a line; all are matched.
struct Suggestion {
  std::string line;
  std::size_t others = 0;
};
std::vector<Suggestion> suggest_suppressions(const std::vector<std::vector<Frame>>& stacks, const FunctionSpread& spread,
                                             std::size_t count = SIZE_MAX);

}  // namespace memtide::analysis
