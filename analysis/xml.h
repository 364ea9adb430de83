// Escaping for XML 1.0 text and attribute values, shared by the flamegraph SVG and the
// JUnit report of `memtide check`.
#pragma once

#include <string>
#include <string_view>

namespace memtide::analysis {

// XML 1.0 forbids most control characters even escaped: each becomes `replacement`, except
// newline and tab when `keep_whitespace`.
inline std::string xml_escape(std::string_view s, char replacement = ' ', bool keep_whitespace = false) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && !(keep_whitespace && (c == '\n' || c == '\t'))) out += replacement;
        else out += c;
    }
  }
  return out;
}

}  // namespace memtide::analysis
