// A module's code symbols sorted by address, for naming return addresses (analysis/symbols.cpp).
#pragma once

#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

namespace memtide::analysis {

// The module's sized code symbols sorted by address. dwfl_module_addrinfo walks the whole
// symbol table at every call, which is what naming ten thousand addresses in a large stripped
// program (cc1plus) took seconds for; with the table sorted once, a lookup is a binary search.
// dwfl_module_addrinfo also names an address after a sizeless label that precedes it, when
// no symbol with a size reaches past that label (its `min_label`); label_may_name tells the
// addresses inside no sized symbol for which that can happen, which alone are left to it (a
// large stripped library, libLLVM, has labels but names none of the thousands of addresses in
// its local functions by them: asking libdw for each took clang's trace 6 s to name).
class FunctionIndex {
 public:
  void build(Dwfl_Module* mod) {
    const int n = dwfl_module_getsymtab(mod);
    for (int i = 1; i < n; ++i) {
      GElf_Sym sym;
      GElf_Addr addr = 0;
      GElf_Word shndx = 0;
      Elf* elf = nullptr;
      const char* name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, &elf, nullptr);
      const int type = GELF_ST_TYPE(sym.st_info);
      // Every symbol libdw's search considers: a sized one bounds the labels below its end.
      if (name && *name && sym.st_shndx != SHN_UNDEF && type != STT_SECTION && type != STT_FILE && type != STT_TLS) {
        if (sym.st_size) spans_.push_back({addr, addr + sym.st_size});
        else if (sym.st_shndx >= SHN_LORESERVE) exact_labels_.push_back(addr);  // absolute: names only itself
        else labels_.push_back(addr);
      }
      if (!name || !*name || shndx == SHN_UNDEF || shndx == SHN_ABS) continue;
      if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE) continue;
      if (sym.st_size == 0) {
        GElf_Shdr shdr;
        Elf_Scn* scn = elf ? elf_getscn(elf, shndx) : nullptr;
        if (scn && gelf_getshdr(scn, &shdr) && (shdr.sh_flags & SHF_EXECINSTR)) labels_in_code_ = true;
        continue;
      }
      const int bind = GELF_ST_BIND(sym.st_info);
      const uint8_t rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
      entries_.push_back({addr, addr + sym.st_size, name, rank});
    }
    // Stable: of two aliases with the same binding the one earlier in the table wins, as in libdw.
    std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
      return a.start != b.start ? a.start < b.start : a.rank < b.rank;
    });
    std::sort(spans_.begin(), spans_.end());
    for (std::size_t i = 1; i < spans_.size(); ++i) spans_[i].second = std::max(spans_[i].second, spans_[i - 1].second);
    std::sort(labels_.begin(), labels_.end());
    std::sort(exact_labels_.begin(), exact_labels_.end());
  }
  // Whether the module has sizeless labels in its code sections.
  bool labels_in_code() const { return labels_in_code_; }
  // Whether dwfl_module_addrinfo may name `addr`, which no sized code symbol holds: a sized
  // symbol of another kind holds it, an absolute label is at it (those name only their own
  // address; a shared library's version names are such), or the closest label at or below it
  // lies at or above the end of every sized symbol starting at or below it. (It names an
  // address by a label only then: the label must be the closest one and not below its
  // `min_label`.)
  bool label_may_name(uint64_t addr) const {
    if (!labels_in_code_) return false;
    auto s = std::upper_bound(spans_.begin(), spans_.end(), addr,
                              [](uint64_t a, const std::pair<uint64_t, uint64_t>& e) { return a < e.first; });
    const uint64_t max_end = s == spans_.begin() ? 0 : std::prev(s)->second;  // prefix maxima
    if (max_end > addr || std::binary_search(exact_labels_.begin(), exact_labels_.end(), addr)) return true;
    auto l = std::upper_bound(labels_.begin(), labels_.end(), addr);
    return l != labels_.begin() && *std::prev(l) >= max_end;
  }
  // The symbol containing `addr` (the one starting closest below it; a global name before a
  // weak or local alias), or nullptr.
  const char* find(uint64_t addr) const {
    auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                               [](uint64_t a, const Entry& e) { return a < e.start; });
    for (int k = 0; k < 8 && it != entries_.begin(); ++k) {
      --it;
      if (addr >= it->end) continue;
      while (it != entries_.begin() && std::prev(it)->start == it->start) --it;  // lowest rank
      return it->name;
    }
    return nullptr;
  }

 private:
  struct Entry {
    uint64_t start, end;
    const char* name;  // in the module's string table (lives as long as the Dwfl)
    uint8_t rank;
  };
  std::vector<Entry> entries_;
  std::vector<std::pair<uint64_t, uint64_t>> spans_;  // sized symbols: start, greatest end so far
  std::vector<uint64_t> labels_;                       // sizeless symbols in sections
  std::vector<uint64_t> exact_labels_;                 // sizeless absolute ones (SHN_ABS, ...)
  bool labels_in_code_ = false;
};

}  // namespace memtide::analysis
