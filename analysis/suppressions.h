// Leak suppressions in LeakSanitizer's format, for `memtide check`:
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
#include <vector>

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

}  // namespace memtide::analysis
