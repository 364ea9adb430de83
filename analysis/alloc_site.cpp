// Allocation sites past the allocation functions (alloc_site.h).
#include "analysis/alloc_site.h"

#include "analysis/suppressions.h"

namespace memtide::analysis {

namespace {

// Functions that common programs and libraries allocate through, each anchored to the whole
// name or to its start (a family: zmalloc_usable, g_malloc0_n).
constexpr std::string_view kBuiltin[] = {
    // redis, valkey, keydb (zmalloc.c)
    "^zmalloc", "^zcalloc", "^zrealloc", "^ztrymalloc", "^ztrycalloc", "^ztryrealloc", "^zstrdup$",
    // git, coreutils and the GNU tools (xalloc), OpenSSH
    "^xmalloc$", "^xcalloc$", "^xrealloc$", "^xzalloc$", "^xmallocz", "^xstrdup$", "^xstrndup$", "^xmemdup",
    "^xreallocarray$", "^xrecallocarray$",
    // glib
    "^g_malloc", "^g_try_malloc", "^g_realloc", "^g_try_realloc", "^g_slice_alloc", "^g_strdup$", "^g_strndup$",
    "^g_memdup",
    // CPython
    "^PyMem_", "^_PyMem_", "^PyObject_Malloc$", "^PyObject_Calloc$", "^PyObject_Realloc$", "^_PyObject_Malloc",
    "^_PyObject_Calloc", "^_PyObject_Realloc", "^pymalloc_",
    // OpenSSL, SQLite, FFmpeg, PHP, APR, PostgreSQL, nginx, SDL, Lua
    "^CRYPTO_malloc$", "^CRYPTO_zalloc$", "^CRYPTO_realloc$", "^sqlite3Malloc", "^sqlite3_malloc", "^sqlite3DbMalloc",
    "^sqlite3MemMalloc$", "^sqlite3_realloc", "^sqlite3Realloc", "^av_malloc", "^av_mallocz", "^av_realloc",
    "^emalloc$", "^ecalloc$", "^erealloc$", "^_emalloc", "^apr_palloc$", "^apr_pcalloc$", "^palloc$", "^palloc0$",
    "^MemoryContextAlloc", "^ngx_alloc$", "^ngx_calloc$", "^ngx_palloc$", "^ngx_pcalloc$", "^ngx_pnalloc$",
    "^SDL_malloc$", "^SDL_calloc$", "^SDL_realloc$", "^luaM_", "^l_alloc$",
    // allocators linked into the program (jemalloc, mimalloc, tcmalloc)
    "^je_", "^mi_", "^tc_",
};

}  // namespace

AllocFunctions::AllocFunctions() {
  for (std::string_view p : kBuiltin) patterns_.emplace_back(p);
  builtin_ = patterns_.size();
}

AllocFunctions& AllocFunctions::process() {
  static AllocFunctions fns;
  return fns;
}

bool AllocFunctions::matches(std::string_view function) const {
  if (function.empty()) return false;
  for (std::string_view p : patterns_) {
    // (The usual "^name" and "^name$" without a `*` compared as they are: a view's row each.)
    if (p.size() > 1 && p.front() == '^' && p.find('*') == std::string_view::npos) {
      const bool whole = p.back() == '$';
      const std::string_view name = p.substr(1, p.size() - 1 - whole);
      if (whole ? function == name : function.starts_with(name)) return true;
      continue;
    }
    if (glob_match(p, function)) return true;
  }
  return false;
}

std::size_t allocation_site(const std::vector<Frame>& leaf_first, const AllocFunctions& fns) {
  for (std::size_t i = 0; i < leaf_first.size(); ++i)
    if (!is_library_frame(leaf_first[i].function, leaf_first[i].module) && !fns.matches(leaf_first[i].function)) return i;
  for (std::size_t i = 0; i < leaf_first.size(); ++i)
    if (!is_library_frame(leaf_first[i].function, leaf_first[i].module)) return i;
  return 0;
}

}  // namespace memtide::analysis
