#include "cli/symbol_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "analysis/symbols.h"
#include "cli/common.h"
#include "formats/wire.h"

namespace memtide::cli {
namespace {

constexpr char kMagic[] = "MTSYMC1\n";
constexpr std::size_t kMagicSize = sizeof kMagic - 1;

// What identifies a file's contents without reading them: path, device, inode, size and
// modification time; "-" when there is no such file.
std::string file_identity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return path + "\n-\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "\n%llu %llu %lld %lld.%09ld\n", static_cast<unsigned long long>(st.st_dev),
                static_cast<unsigned long long>(st.st_ino), static_cast<long long>(st.st_size),
                static_cast<long long>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec);
  return path + buf;
}

bool read_all(const std::string& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1 << 16];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return n == 0;
}

// Adds the entries of a cache file to `into` (those it has already win). False when the file
// is not one: nothing is taken from it then.
bool parse(const std::string& data, std::unordered_map<uint64_t, CachedFrames>& into) {
  if (data.size() < kMagicSize || data.compare(0, kMagicSize, kMagic) != 0) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  wire::Cursor c(p + kMagicSize, p + data.size());
  std::unordered_map<uint64_t, CachedFrames> got;
  while (!c.at_end()) {
    uint64_t offset, count;
    if (!c.get_varint(offset) || !c.get_varint(count) || count > 256) return false;
    CachedFrames frames(static_cast<std::size_t>(count));
    for (CachedFrame& f : frames) {
      const uint8_t *fn, *fl;
      std::size_t fnn, fln;
      if (!c.get_bytes(fn, fnn) || !c.get_bytes(fl, fln) || !c.get_varint(f.line)) return false;
      f.function.assign(reinterpret_cast<const char*>(fn), fnn);
      f.file.assign(reinterpret_cast<const char*>(fl), fln);
    }
    got[offset] = std::move(frames);
  }
  for (auto& [off, frames] : got) into.try_emplace(off, std::move(frames));
  return true;
}

void put_varint(std::string& out, uint64_t v) {
  uint8_t b[wire::kMaxVarint];
  out.append(reinterpret_cast<const char*>(b), static_cast<std::size_t>(wire::put_varint(b, v) - b));
}
void put_bytes(std::string& out, const std::string& s) {
  put_varint(out, s.size());
  out += s;
}

// mkdir -p; false when the directory cannot be made.
bool make_dirs(const std::string& dir) {
  for (std::size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string part = dir.substr(0, i);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

}  // namespace

std::string SymbolCache::default_dir() {
  if (const char* d = std::getenv("MEMTIDE_CACHE_DIR")) return d;  // "" turns the cache off
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return std::string(x) + "/memtide";
  if (const char* h = std::getenv("HOME"); h && *h == '/') return std::string(h) + "/.cache/memtide";
  return {};
}

SymbolCache::Module& SymbolCache::module(const analysis::ModuleInfo& m) {
  Module& mod = modules_[m.id.value];
  if (mod.loaded) return mod;
  mod.loaded = true;
  if (dir_.empty() || m.build_id.empty() || m.path.empty() || m.path[0] != '/') return mod;
  const std::string id = analysis::hex_bytes(m.build_id);
  std::string key = id + "\n" + file_identity(m.path);
  if (id.size() > 2) key += file_identity("/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug");
  char name[40];
  std::snprintf(name, sizeof name, "-%016llx", static_cast<unsigned long long>(XXH3_64bits(key.data(), key.size())));
  mod.file = dir_ + "/symbols/" + id + name;
  std::string data;
  if (read_all(mod.file, data)) parse(data, mod.entries);
  return mod;
}

const CachedFrames* SymbolCache::find(const analysis::ModuleInfo& m, uint64_t offset, bool* from_disk) {
  Module& mod = module(m);
  auto it = mod.entries.find(offset);
  if (it == mod.entries.end()) return nullptr;
  if (from_disk) *from_disk = !mod.put_here.count(offset);
  return &it->second;
}

bool SymbolCache::known(const analysis::ModuleInfo& m) { return !module(m).entries.empty(); }

void SymbolCache::put(const analysis::ModuleInfo& m, uint64_t offset, CachedFrames frames) {
  Module& mod = module(m);
  if (mod.file.empty()) return;
  mod.entries[offset] = std::move(frames);
  mod.put_here.insert(offset);
  mod.dirty = true;
}

void SymbolCache::save() {
  for (auto& [id, mod] : modules_) {
    if (!mod.dirty || mod.file.empty()) continue;
    mod.dirty = false;
    std::string old;
    if (read_all(mod.file, old)) parse(old, mod.entries);  // another process's new entries too
    std::string out(kMagic, kMagicSize);
    for (const auto& [off, frames] : mod.entries) {
      put_varint(out, off);
      put_varint(out, frames.size());
      for (const CachedFrame& f : frames) {
        put_bytes(out, f.function);
        put_bytes(out, f.file);
        put_varint(out, f.line);
      }
    }
    if (!make_dirs(mod.file.substr(0, mod.file.rfind('/')))) continue;
    (void)write_whole_file(mod.file, out);  // (written aside, then renamed into place whole)
  }
}

}  // namespace memtide::cli
