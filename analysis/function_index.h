// A module's code symbols sorted by address, for naming return addresses (analysis/symbols.cpp).
#pragma once

#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace memtide::analysis {

// The module's sized code symbols sorted by address. dwfl_module_addrinfo walks the whole
// symbol table at every call, which is what naming ten thousand addresses in a large stripped
// program (cc1plus) took seconds for; with the table sorted once, a lookup is a binary search.
// dwfl_module_addrinfo also names an address after a sizeless label that precedes it; a module
// with such labels in its code sections sends the addresses inside no sized symbol there.
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
  }
  // Whether an address inside no sized symbol may still have a name (dwfl_module_addrinfo).
  bool labels_in_code() const { return labels_in_code_; }
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
  bool labels_in_code_ = false;
};

}  // namespace memtide::analysis
