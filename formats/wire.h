// Primitive encodings of the trace format: little-endian fixed integers, LEB128 varints,
// zigzag for signed deltas. Header-only and allocation-free: the recorder's hot path uses
// the put_* functions directly. docs/FORMAT.md section "Primitives" describes the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace memtide::wire {

// A varint never takes more than 10 bytes (ceil(64 / 7)).
inline constexpr std::size_t kMaxVarint = 10;

inline uint8_t* put_varint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

inline constexpr uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline constexpr int64_t unzigzag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

inline uint8_t* put_svarint(uint8_t* p, int64_t v) { return put_varint(p, zigzag(v)); }

inline uint8_t* put_bytes(uint8_t* p, const void* data, std::size_t n) {
  p = put_varint(p, n);
  if (n) std::memcpy(p, data, n);
  return p + n;
}

template <typename T>
inline void store_le(uint8_t* p, T v) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "memtide targets little-endian hosts");
  std::memcpy(p, &v, sizeof v);
}
template <typename T>
inline T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Bounds-checked reading cursor. Every get_* returns false (and leaves the cursor failed)
// instead of reading past `end`, so a decoder can check once per record.
class Cursor {
 public:
  Cursor(const uint8_t* begin, const uint8_t* end) : p_(begin), begin_(begin), end_(end) {}

  bool get_varint(uint64_t& out) {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return fail();
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        // The tenth byte may only carry the top bit of a 64-bit value.
        if (shift == 63 && b > 1) return fail();
        out = v;
        return true;
      }
    }
    return fail();
  }
  bool get_svarint(int64_t& out) {
    uint64_t v;
    if (!get_varint(v)) return false;
    out = unzigzag(v);
    return true;
  }
  bool get_u8(uint8_t& out) {
    if (p_ >= end_) return fail();
    out = *p_++;
    return true;
  }
  // A length-prefixed byte string; the view points into the underlying buffer.
  bool get_bytes(const uint8_t*& data, std::size_t& n) {
    uint64_t len;
    if (!get_varint(len)) return false;
    if (len > static_cast<uint64_t>(end_ - p_)) return fail();
    data = p_;
    n = static_cast<std::size_t>(len);
    p_ += n;
    return true;
  }
  bool skip(uint64_t n) {
    if (n > static_cast<uint64_t>(end_ - p_)) return fail();
    p_ += n;
    return true;
  }

  const uint8_t* pos() const { return p_; }
  const uint8_t* end() const { return end_; }
  std::size_t offset() const { return static_cast<std::size_t>(p_ - begin_); }
  std::size_t remaining() const { return static_cast<std::size_t>(end_ - p_); }
  bool at_end() const { return p_ >= end_; }
  bool failed() const { return failed_; }

 private:
  bool fail() {
    failed_ = true;
    return false;
  }
  const uint8_t* p_;
  const uint8_t* begin_;
  const uint8_t* end_;
  bool failed_ = false;
};

}  // namespace memtide::wire
