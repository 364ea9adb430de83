// The allocation site a person reads: the first frame of a stack, from the allocation outwards,
// that is the program's own code rather than the allocator, the C and C++ runtimes or a function
// the program allocates through (redis's zmalloc, git's xmalloc, glib's g_malloc, CPython's
// PyMem_Malloc). Stacks are recorded from the allocation call, so without this every row of a
// program with such a wrapper would be named after the wrapper. Used by the Leaks and Growth
// views and marked in the CLI's stacks (text and JSON).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/symbols.h"

namespace memtide::analysis {

// Function-name patterns of allocation functions, in LeakSanitizer's pattern syntax
// (suppressions.h: `*` any run, `^` and `$` anchors): a built-in list of common wrappers,
// then the user's own (`--alloc-fn`).
class AllocFunctions {
 public:
  AllocFunctions();  // the built-in list
  // The list the readers of this process use (the command's `--alloc-fn` patterns added to it).
  static AllocFunctions& process();
  void add(std::string pattern) { patterns_.push_back(std::move(pattern)); }
  bool matches(std::string_view function) const;
  const std::vector<std::string>& patterns() const { return patterns_; }
  std::size_t builtin_count() const { return builtin_; }

 private:
  std::vector<std::string> patterns_;
  std::size_t builtin_ = 0;
};

// The index in `leaf_first` (allocation first) of the allocation site: the first frame with a
// function name that is neither a library's (is_library_frame) nor an allocation function's;
// when there is none, the first frame that is not a library's; else 0.
std::size_t allocation_site(const std::vector<Frame>& leaf_first, const AllocFunctions& fns = AllocFunctions::process());

}  // namespace memtide::analysis
